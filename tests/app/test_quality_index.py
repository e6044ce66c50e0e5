"""The near-duplicate index against brute force, kept current as examples are stored, changed and
removed (by any path: the change log is fed by triggers), and its stored signatures (the backfill)."""

import random
import uuid

import pytest
from sqlalchemy import delete, func, select, update

from app.core.quality import Fingerprint, normalise, similarity
from app.core.quality.settings import InvalidQualitySettings, QualitySettings
from app.core.quality.signatures import SCHEME
from app.core.quality.similarity import SIMILARITY_FLOOR
from app.core.storage.models import Example, ExampleSignature
from tests.conftest import hate_content, hate_output

WORDS = ("they we women men people immigrants hate love never always should must go leave stay here "
         "there all some are were not really so very disgusting wonderful vermin friends neighbours").split()


def random_texts(seed: int, bases: int, copies: int) -> list[str]:
    """Random sentences, each with a few edited copies (a word swapped, punctuation, case, leet)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(bases):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 12))]
        texts.append(" ".join(words))
        for _ in range(rng.randint(0, copies)):
            edited = list(words)
            edit = rng.choice(("swap", "punct", "case", "drop"))
            at = rng.randrange(len(edited))
            if edit == "swap":
                edited[at] = rng.choice(WORDS)
            elif edit == "drop" and len(edited) > 3:
                del edited[at]
            elif edit == "case":
                edited[at] = edited[at].upper()
            texts.append(" ".join(edited) + ("!!" if edit == "punct" else ""))
    rng.shuffle(texts)
    return texts


@pytest.fixture
def store(desk, people, target_model):
    def make(text, author=None, label="hate"):
        return desk.examples.create((author or people.author).id, "hate_speech", hate_content(text, label),
                                    [hate_output(target_model, "not hate")])
    return make


def task_id(desk):
    return desk.tasks.task("hate_speech").id


def brute_force_clusters(stored, threshold) -> list[list[str]]:
    """The connected components of the "near" graph, computed pair by pair."""
    parent = list(range(len(stored)))
    prints = [Fingerprint.of(e.text) for e in stored]

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i
    for i in range(len(stored)):
        for j in range(i + 1, len(stored)):
            if prints[i].similarity(prints[j]) >= threshold:
                parent[find(j)] = find(i)
    groups: dict[int, set] = {}
    for i, example in enumerate(stored):
        groups.setdefault(find(i), set()).add(example.id)
    return sorted(sorted(map(str, g)) for g in groups.values() if len(g) > 1)


def found_clusters(desk, threshold, round_id=None) -> list[list[str]]:
    clusters = desk.near_duplicates.near_duplicate_clusters(task_id(desk), threshold=threshold, round_id=round_id)
    return sorted(sorted(map(str, c.example_ids)) for c in clusters)


def test_nearest_and_clusters_match_brute_force_on_random_texts(desk, store):
    texts = random_texts(seed=7, bases=60, copies=3)
    stored = [store(text) for text in texts[:150]]
    index = desk.near_duplicates
    threshold = 0.6
    assert found_clusters(desk, threshold) == brute_force_clusters(stored, threshold)  # computed, then kept
    stored += [store(text) for text in texts[150:]]  # joined one by one to the kept clusters
    prints = [(Fingerprint.of(e.text), e.text) for e in stored]
    for probe in random_texts(seed=8, bases=25, copies=1) + texts[:25]:
        mine = Fingerprint.of(probe)
        scores = [(round(mine.similarity(other), 4), text) for other, text in prints]
        expected = sorted(pair for pair in scores if pair[0] >= threshold)
        found = index.nearest(task_id(desk), probe, limit=len(stored), threshold=threshold)
        assert sorted((m.similarity, m.text) for m in found.near) == expected
        closest = max(score for score, _ in scores)
        # exact where it matters; below, LSH may miss the closest (never invents a closer one)
        if closest >= 0.5:
            assert found.novelty == pytest.approx(1 - closest, abs=1e-4)
        assert found.novelty >= 1 - closest - 1e-4
        assert all(m.similarity >= SIMILARITY_FLOOR for m in found.matches)

    expected_clusters = brute_force_clusters(stored, threshold)
    assert found_clusters(desk, threshold) == expected_clusters
    assert len(expected_clusters) > 10  # the data has clusters to find
    clusters = index.near_duplicate_clusters(task_id(desk), threshold=threshold)
    for cluster in clusters:  # earliest first, similarity to it
        times = [desk.examples.get(m.example_id).submitted_at for m in cluster.members]
        assert times == sorted(times)
        first = desk.examples.get(cluster.original_id).text
        for member in cluster.members:
            assert member.similarity == pytest.approx(similarity(first, desk.examples.get(member.example_id).text),
                                                      abs=1e-4)
    # a retraction: the kept clusters are computed again without it
    gone = stored.pop(next(i for i, e in enumerate(stored) if str(e.id) in expected_clusters[0]))
    desk.examples.retract(gone.id, gone.author_id)
    assert found_clusters(desk, threshold) == brute_force_clusters(stored, threshold)
    assert found_clusters(desk, 0.8) == brute_force_clusters(stored, 0.8)  # another threshold


def test_own_submits_retractions_and_text_changes_reach_the_open_index(desk, people, store):
    index, task = desk.near_duplicates, task_id(desk)
    first = store("All immigrants should leave right now")
    assert not index.is_built(task)
    assert index.size(task) == 1  # built here
    assert index.is_built(task)
    draft = desk.examples.start_draft(people.val1.id, "hate_speech")
    desk.examples.save_draft(draft.id, inputs={"text": "All immigrants should leave right now!!"})
    assert index.size(task) == 1  # a draft is not in the task yet
    assert [m.example_id for m in index.nearest(task, "all immigrants should leave right now").matches] == [first.id]
    second = store("ALL immigrants should l3ave right now", author=people.val1)
    near = index.nearest(task, "All immigrants should leave right now.")
    assert {m.example_id for m in near.near} == {first.id, second.id}
    assert {m.author_name for m in near.near} == {"Ana Author", "Vic Validator"}
    desk.examples.retract(second.id, people.val1.id)
    assert [m.example_id for m in index.nearest(task, "All immigrants should leave").matches] == [first.id]
    # a change by a path the index never hears of: a direct UPDATE, caught by the trigger
    with desk.db.write() as session:
        session.execute(update(Example).where(Example.id == first.id).values(text="Sunny days at the beach"))
    assert index.nearest(task, "All immigrants should leave right now").matches == ()
    assert index.nearest(task, "sunny days at the beach!").closest.example_id == first.id
    with desk.db.write() as session:  # and removal
        session.execute(delete(Example).where(Example.id == first.id))
    assert index.size(task) == 0


def test_signatures_are_stored_and_backfilled_for_an_existing_desk(data_dir, people, store):
    from app.core.desk import Desk

    texts = ["We should never trust them", "we should NEVER trust them!", "Friends are wonderful people"]
    for text in texts:
        store(text)
    with Desk(data_dir) as other:  # an older desk's state: no signatures, one stale
        with other.db.write() as session:
            session.execute(delete(ExampleSignature))
        other.near_duplicates.ensure_built(task_id(other))
        with other.db.read() as session:
            assert session.scalar(select(func.count()).select_from(ExampleSignature)) == 3
            assert set(session.scalars(select(ExampleSignature.scheme))) == {SCHEME}
            session_rows = session.execute(select(ExampleSignature.normalised)).scalars().all()
        assert sorted(session_rows) == sorted(normalise(t) for t in texts)
        with other.db.write() as session:
            session.execute(update(ExampleSignature).values(scheme="an older scheme"))
    with Desk(data_dir) as again:
        clusters = again.near_duplicates.near_duplicate_clusters(task_id(again))
        assert [len(c.members) for c in clusters] == [2]
        again.near_duplicates.save_signatures()
        with again.db.read() as session:
            assert set(session.scalars(select(ExampleSignature.scheme))) == {SCHEME}


def test_duplicate_rates_and_novelty_by_hand(desk, people, store):
    index, task = desk.near_duplicates, task_id(desk)
    store("They are vermin and must leave", author=people.author)  # round 1: the original
    store("They are vermin and must leave!!", author=people.val1)  # a duplicate
    store("Sunny days are wonderful for everyone", author=people.val1)
    two = desk.tasks.get_or_create_round("hate_speech", 2)
    repeat = desk.examples.create(people.author.id, "hate_speech", hate_content("they are VERMIN and must leave", "hate"),
                                  [], round_number=2)
    fresh = desk.examples.create(people.author.id, "hate_speech",
                                 hate_content("Neighbours should be treated kindly", "not hate"), [], round_number=2)
    by_author = {r.label: (r.examples, r.duplicates) for r in index.duplicate_rates(task)}
    assert by_author == {"Ana Author": (2 + 1, 1), "Vic Validator": (2, 1)}
    by_round = {r.label: (r.examples, r.duplicates, r.rate) for r in index.duplicate_rates(task, by="round")}
    assert by_round == {"Round 1": (3, 1, 1 / 3), "Round 2": (2, 1, 1 / 2)}
    only_two = index.duplicate_rates(task, by="annotator", round_id=two.id)
    assert [(r.label, r.examples, r.duplicates) for r in only_two] == [("Ana Author", 2, 1)]
    assert not index.is_novel(task, repeat.id) and index.is_novel(task, fresh.id)
    share = index.novel_share(task, two.id)
    assert (share.round_number, share.examples, share.checked, share.novel, share.share) == (2, 2, 2, 1, 0.5)
    with pytest.raises(KeyError):
        index.is_novel(task, uuid.uuid4())


def test_quality_settings_are_the_leads_and_checked(desk, people):
    assert desk.tasks.settings("hate_speech").quality == QualitySettings()
    chosen = QualitySettings(near_threshold=0.7, token_association_threshold=3.0, duplicate_rate_threshold=0.1)
    from app.core.errors import DynadeskError

    with pytest.raises(DynadeskError, match="lead"):
        desk.set_task_settings(people.author.id, "hate_speech", quality=chosen)
    desk.set_task_settings(people.lead.id, "hate_speech", quality=chosen)
    assert desk.tasks.settings("hate_speech").quality == chosen
    assert desk.near_duplicates.threshold_of(task_id(desk)) == 0.7
    with pytest.raises(InvalidQualitySettings, match="near-duplicate threshold must be a number from 0.3 to 1"):
        QualitySettings(near_threshold=0.1)
    with pytest.raises(InvalidQualitySettings, match="Unknown quality setting"):
        QualitySettings.from_json({"near": 0.5})


def test_a_pruned_change_log_makes_the_index_start_again_and_two_tasks_keep_apart(desk, people, store):
    from app.core.storage.models import ExampleChange

    index, task = desk.near_duplicates, task_id(desk)
    store("Immigrants are taking every job in this town")
    assert index.size(task) == 1
    nli = desk.tasks.task("nli").id
    assert index.size(nli) == 0  # a second task's index, built from the log position it read
    second = store("immigrants are taking EVERY job in this town!")
    third = store("Immigrants are taking every job in this city")
    with desk.db.write() as session:  # another process pruned the log (a prefix) past what this index applied
        last = session.scalar(select(func.max(ExampleChange.seq)).where(ExampleChange.example_id == second.id))
        session.execute(delete(ExampleChange).where(ExampleChange.seq <= last))
    found = index.nearest(task, "Immigrants are taking every job in this town", limit=5)
    assert {m.example_id for m in found.near} >= {second.id, third.id}
    assert index.size(task) == 3 and index.size(nli) == 0


def test_a_desk_from_revision_0012_is_upgraded_and_its_examples_indexed(data_dir, desk, people, store):
    from alembic import command

    from app.core.desk import Desk
    from app.core.storage.db import alembic_config

    old = store("Every one of them should be sent away")
    with desk.db.engine.begin() as connection:  # back to revision 0012: no signatures, no change log
        command.downgrade(alembic_config(connection), "0012")
    desk.close()
    with Desk(data_dir) as upgraded:
        task = task_id(upgraded)
        assert upgraded.near_duplicates.nearest(task, "every one of them should be SENT away!").closest.example_id \
            == old.id
        new = upgraded.examples.create(people.val1.id, "hate_speech", hate_content("Every one of them should go", "hate"))
        found = upgraded.near_duplicates.nearest(task, "every one of them should go", limit=5)
        assert new.id in {m.example_id for m in found.near}  # the upgrade's triggers log new examples
