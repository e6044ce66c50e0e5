"""The Dashboard's view-models, built from hand-made service figures, without Qt."""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

from app.views.dashboard import (
    Bar,
    FilterValues,
    build_agreement,
    build_choices,
    build_figures,
    build_table,
    facet_values,
    format_value,
    interpretation,
)

COLUMNS = [("name", "Annotator", "text", "Display name"), ("submitted", "Submitted", "int", ""),
           ("mer", "MER", "rate", ""), ("median_seconds", "Median time", "seconds", ""),
           ("mean_edit_distance", "Edit dist.", "float1", "")]


def group(key, name, submitted, mer=None, seconds=None, edits=None):
    return NS(key=key, name=name, submitted=submitted, mer=mer, median_seconds=seconds, mean_edit_distance=edits)


def agreement(pairs=(), fleiss=None, alpha=None):
    return NS(pairs=list(pairs), fleiss_kappa=fleiss, fleiss_items=12, krippendorff_alpha=alpha, ratings=1234)


def figures(**changes):
    base = dict(
        total_examples=1200, matching=1200, annotators=[group("p1", "Ana", 5, 0.6, 55, 2.0), group("p2", "Xia", 0)],
        breakdowns={"round": [group("r1", "Round 1", 5, 0.6)]},
        breakdown_titles={"round": "Per round", "label": "Per label"},
        agreement=agreement(), rater_names={}, time_edges=[10.0, 20.0],
        time_series=[NS(key="p1", name="Ana", mer=[math.nan, 0.5], vmer=[math.nan, 0.25])],
        labels=[NS(key="hate", name="hate", value=3, second=None)],
        facets={"target": [NS(key="women", name="women", value=2, second=None)]},
        fooling_by_round=[NS(key="r1", name="Round 1", value=0.6, second=0.2)],
        backlog_times=[10.0, 20.0], backlog=[1, 0], bin_seconds=3600.0)
    return NS(**{**base, **changes})


def build(fig, **kwargs):
    options = dict(breakdown="round", chart_people_chosen=False, annotator_columns=COLUMNS,
                   breakdown_columns=COLUMNS, min_overlap=3)
    return build_figures(fig, **{**options, **kwargs})


def test_cells_are_formatted_and_empty_figures_sort_last():
    table = build_table(COLUMNS, [group("p1", "Ana", 1234, 0.6, 75, 2.0), group("p2", "Xia", 0)])
    assert [c.header for c in table.columns] == ["Annotator", "Submitted", "MER", "Median time", "Edit dist."]
    assert [c.text for c in table.columns] == [True, False, False, False, False]
    assert [c.text for c in table.rows[0].cells] == ["Ana", "1,234", "60.0%", "1 min 15 s", "2.0"]
    assert [c.text for c in table.rows[1].cells][2:] == ["—", "—", "—"]
    assert table.rows[0].key == "p1" and table.rows[0].cells[0].sort == "ana" and table.rows[1].cells[2].sort is None
    assert format_value("seconds", 55) == "55 s" and format_value("kappa", 0.456) == "0.46"
    assert format_value("rate", math.nan) == "—"


def test_the_page_for_one_filter():
    view = build(figures(matching=7), threshold_warning="needs 3 matching verdicts")
    assert view.summary == "7 of 1,200 examples"
    assert build(figures()).summary == "1,200 examples"
    assert view.threshold_warning == "needs 3 matching verdicts" and build(figures()).threshold_warning == ""
    assert [c.text for c in view.annotators.rows[0].cells][:3] == ["Ana", "5", "60.0%"]
    assert view.breakdown == "round" and [(c.key, c.name) for c in view.breakdowns] == [
        ("round", "Per round"), ("label", "Per label")]
    assert build(figures(), breakdown="label").breakdown == "round"  # the figures hold only the round breakdown
    assert view.mer_lines[0].values[1] == 0.5 and view.vmer_lines[0].values[1] == 0.25
    assert view.people_note == "top 1 by examples; select rows to choose"
    assert build(figures(), chart_people_chosen=True).people_note == ""
    assert view.rounds == (Bar("r1", "Round 1", 0.6, 0.2),)
    assert view.facet("target") == (Bar("women", "women", 2),) and view.facet("other") == ()
    assert view.backlog == (1.0, 0.0) and view.bin_seconds == 3600.0


def test_agreement_pairs_lowest_first_with_names():
    pairs = [NS(rater_a=0, rater_b=1, items=4, observed=0.75, kappa=0.5),
             NS(rater_a=0, rater_b=2, items=3, observed=1.0, kappa=None),
             NS(rater_a=1, rater_b=2, items=5, observed=0.2, kappa=-0.1)]
    view = build_agreement(agreement(pairs, fleiss=0.123, alpha=0.7), {0: "Vic", 1: "Wen"}, min_overlap=3)
    assert (view.fleiss, view.alpha, view.ratings, view.min_overlap) == ("0.12", "0.70", 1234, 3)
    assert view.interpretation == "Agreement is substantial (Landis & Koch)."
    assert [[c.text for c in r.cells] for r in view.pairs.rows] == [
        ["Wen", "?", "5", "20.0%", "-0.10"], ["Vic", "Wen", "4", "75.0%", "0.50"], ["Vic", "?", "3", "100.0%", "—"]]
    empty = build_agreement(agreement(), {}, 3)
    assert (empty.fleiss, empty.alpha, empty.interpretation) == ("—", "—", "")
    assert interpretation(-0.2) == "Agreement is poor (Landis & Koch)." and interpretation(0.9).endswith("perfect (Landis & Koch).")


def test_filter_values_and_choices():
    values = FilterValues(facets=facet_values({"target": "women", "type": None}))
    assert values.facets == (("target", "women"),) and values.facet("target") == "women" and values.facet("type") is None
    choices = build_choices([("r1", 1)], [("b", "bo"), ("a", "Al")], ["hate", "not hate"],
                            [("target", "Target", ("women",), ["zebras", "women", "ants"])])
    assert [(c.key, c.name) for c in choices.rounds] == [("r1", "Round 1")]
    assert [c.name for c in choices.people] == ["Al", "bo"]
    assert choices.facets[0].values == ("women", "ants", "zebras") and choices.labels == ("hate", "not hate")
