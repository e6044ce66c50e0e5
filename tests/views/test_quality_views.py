"""View-models of the data-quality guard, from hand-made index answers."""

import uuid

import pytest

from app.core.quality.near_duplicates import ClusterMember, DuplicateCluster, Nearest, NearMatch
from app.core.quality.settings import InvalidQualitySettings, QualitySettings
from app.views.quality import (
    NoveltyLevel,
    chosen_settings,
    clusters_view,
    duplicate_warning_view,
    novelty_view,
    quality_settings_message,
    quality_settings_view,
)

ANA, BO = uuid.uuid4(), uuid.uuid4()


def match(similarity: float, text: str = "They are vermin", author: str = "Ana") -> NearMatch:
    return NearMatch(uuid.uuid4(), similarity, text, "hate", 2, ANA, author)


def test_novelty_levels_and_the_closest_example_on_hover():
    novel = novelty_view(Nearest((), 0.5))
    assert (novel.level, novel.text) == (NoveltyLevel.NOVEL, "Novelty 100%")
    assert "No example of this round is 30% similar" in novel.tooltip
    similar = novelty_view(Nearest((match(0.42),), 0.5))
    assert (similar.level, similar.text) == (NoveltyLevel.SIMILAR, "Novelty 58%")
    assert "“They are vermin”" in similar.tooltip and "Ana, round 2, “hate”" in similar.tooltip
    assert "42% similar; near-duplicates from 50%" in similar.tooltip
    duplicate = novelty_view(Nearest((match(0.5),), 0.5))  # the threshold is inclusive
    assert duplicate.level is NoveltyLevel.DUPLICATE and duplicate.text == "Novelty 50%"


def test_the_warning_names_the_nearest_example_and_its_similarity():
    assert duplicate_warning_view(Nearest((match(0.49),), 0.5)) is None
    same = duplicate_warning_view(Nearest((match(1.0, "<b>x</b> & y"),), 0.5))
    assert "the same text as" in same.html and "&lt;b&gt;x&lt;/b&gt; &amp; y" in same.html  # escaped
    two = duplicate_warning_view(Nearest((match(0.8), match(0.6), match(0.3)), 0.5))
    assert "80% similar to" in two.html and "(and 1 more near-duplicate)" in two.html
    assert two.similarity == 0.8


def test_clusters_are_listed_largest_first_and_filtered_by_annotator():
    ids = [uuid.uuid4() for _ in range(5)]
    clusters = [DuplicateCluster((ClusterMember(ids[0], 1, ANA, 1.0), ClusterMember(ids[1], 1, BO, 0.75),
                                  ClusterMember(ids[2], 2, BO, 1.0))),
                DuplicateCluster((ClusterMember(ids[3], 1, ANA, 1.0), ClusterMember(ids[4], 2, ANA, 0.6)))]
    summaries = {i: (f"text {n}", "Ana" if n in (0, 3, 4) else "Bo") for n, i in enumerate(ids)}
    view = clusters_view(clusters, summaries, 0.5)
    assert [(r.cluster, r.first, r.text, r.author, r.round_number) for r in view.rows] == [
        (1, True, "text 0", "Ana", 1), (1, False, "text 1", "Bo", 1), (1, False, "text 2", "Bo", 2),
        (2, True, "text 3", "Ana", 1), (2, False, "text 4", "Ana", 2)]
    assert view.summary == "2 clusters of near-duplicates (similarity ≥ 50%), 5 examples."
    only_bo = clusters_view(clusters, summaries, 0.5, annotator=BO)
    assert {r.cluster for r in only_bo.rows} == {1} and "1 cluster of" in only_bo.summary
    assert "listed" in clusters_view(clusters, summaries, 0.5, shown=1).summary
    assert clusters_view([], {}, 0.7).summary == "No near-duplicates (similarity 70% or more) among these examples."


def test_quality_settings_round_trip_through_the_dialog_values():
    view = quality_settings_view("Hate speech", QualitySettings(near_threshold=0.65))
    assert (view.near_percent, view.token_z, view.duplicate_rate_percent) == (65, 5.0, 25)
    assert view.near_range == (30, 100) and view.rate_range == (1, 100)
    assert chosen_settings(65, 4.5, 10) == QualitySettings(0.65, 4.5, 0.10)
    with pytest.raises(InvalidQualitySettings, match="duplicate-rate alert threshold must be a number from 0.01"):
        chosen_settings(65, 4.5, 0)
    assert "from 65% similarity" in quality_settings_message(QualitySettings(near_threshold=0.65))
