"""A candidate trained with ``--int8 later``: promotion opens the round at once on its fp32 ONNX form, and its
int8 form follows (the desk's window in the background, `dynadesk rounds int8` in the foreground): the search runs
on the texts training kept, and the round switches to the int8 form when it passes its check.

The candidate is the tiny hate-speech trigger model's trained part (tests/model_fixtures.py): its int8 search on
2,000 trigger sentences takes seconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.core.desk import Desk
from app.core.domain import Role
from app.core.next_round.deferred_int8 import pending_int8, prepare_int8_files, switch_to_int8
from app.core.next_round.promotion import promote_candidate
from local_models.int8_form import DEFERRED_TEXTS_FILE, REFUSAL_FILE, defer_int8_recipe
from local_models.int8_search import TaskTexts, read_recipe_file
from local_models.parity import MIN_TEXTS
from tests.model_fixtures import LABELS, trigger_sentences

TASK = "hate_speech"


def texts(n: int, seed: int) -> tuple[str, ...]:
    return tuple(text for text, _ in trigger_sentences(n, seed=seed, labels=LABELS))


@pytest.fixture(scope="module")
def deferred_part(hate_trigger_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The trained part as `dynadesk train --int8 later` leaves it (no recipe yet, the search's texts beside it),
    and a model cache holding what its promotion prepares (assembled, fp32 ONNX): built once for the module."""
    from app.core.next_round.promotion import CANDIDATE_SLUG
    from local_models.default_model import prepare_default_model

    root = tmp_path_factory.mktemp("deferred")
    part = root / "candidate"
    shutil.copytree(hate_trigger_model_dir.parent.parent / "parts" / "hate-trigger", part)
    defer_int8_recipe(part, TaskTexts(texts(MIN_TEXTS, 31), texts(200, 32), "the run's held-out texts"))
    prepared = prepare_default_model(part, root / "cache", slug=CANDIDATE_SLUG)
    assert not prepared.onnx_int8 and "deferred" in prepared.notes[0]
    assert not (prepared.onnx_dir.parent / REFUSAL_FILE).exists()  # not a verdict: nothing is remembered
    return part, root / "cache"


@pytest.fixture
def deferred_candidate(deferred_part, data_dir, tmp_path) -> Path:
    """A private copy of the part, its promotion's preparation already in this desk's model cache."""
    from app.core import paths

    part, cache = deferred_part
    shutil.copytree(part, tmp_path / "candidate")
    shutil.copytree(cache, paths.models_cache_dir(data_dir), dirs_exist_ok=True)
    return tmp_path / "candidate"


def promoted(data_dir: Path, part: Path):
    with Desk(data_dir) as desk:
        owner = desk.people.create("Olga Owner", Role.OWNER)
        desk.switch_person(owner.id)
        old = desk.models.register("round-1 target", "onnx", "aa" * 32, task_id=desk.tasks.task(TASK).id)
        desk.rounds.set_models(desk.tasks.round(TASK, 1).id, owner.id, [old.id])
        # no comparison here: the deferral is under test, not the promotion rule
        return promote_candidate(desk, TASK, part, with_current=True, force=True,
                                 reason="a fixture candidate, promoted to test the deferred int8 form"), old.id, owner.id


def test_a_deferred_candidate_opens_its_round_on_fp32_and_switches_to_int8_once_the_search_passes(
        data_dir, deferred_candidate):
    promotion, old_id, _ = promoted(data_dir, deferred_candidate)
    assert promotion.onnx and promotion.candidate.name.endswith("ONNX fp32")
    assert "deferred" in promotion.parity_note
    fp32_dir = Path(promotion.candidate.path)
    with Desk(data_dir) as desk:
        [pending] = pending_int8(desk)
        assert (pending.fp32_id, pending.round_number) == (promotion.candidate.id, 2)
        messages: list[str] = []
        from local_models.progress import Progress

        prepared = prepare_int8_files(desk, pending, in_child=False, progress=Progress(on_message=messages.append))
        assert prepared.onnx_int8, prepared.notes
        assert any("int8" in m and "passed" in m for m in messages)  # each attempt is reported as it goes
        outcome = switch_to_int8(desk, pending, prepared)
        assert outcome.switched and outcome.record is not None and "int8 parity passed" in outcome.note
        assert "now runs the int8 form" in outcome.line(pending)
        # the int8 form takes the fp32 form's place; the ensemble's order stays
        assert [m.id for m in desk.models.round_models(promotion.round_id)] == [outcome.record.id, old_id]
        int8 = desk.models.get(outcome.record.id)
        fp32 = desk.models.get(promotion.candidate.id)
        assert int8.provenance["parent_model"] == fp32.provenance["parent_model"]
        assert int8.provenance["lineage"]["round"] == 2 and int8.provenance["int8_of"]["sha256"] == fp32.sha256
        assert fp32.provenance["int8_deferred"]["switched"] is True
        assert (fp32_dir / "model.onnx").is_file()  # the fp32 form stays whole: it is a registered model
        assert pending_int8(desk) == []
    recorded = read_recipe_file(deferred_candidate)
    assert recorded.usable and not recorded.deferred  # the recipe training would have written
    assert not (deferred_candidate / DEFERRED_TEXTS_FILE).exists()


def test_a_round_changed_meanwhile_keeps_its_targets(data_dir, deferred_candidate):
    promotion, old_id, owner_id = promoted(data_dir, deferred_candidate)
    with Desk(data_dir) as desk:
        [pending] = pending_int8(desk)
        desk.rounds.set_models(promotion.round_id, owner_id, [old_id])  # a lead chose another target
        assert pending_int8(desk) == []  # nothing to switch any more
        prepared = prepare_int8_files(desk, pending, in_child=False)
        outcome = switch_to_int8(desk, pending, prepared)
        assert outcome.record is not None and not outcome.switched
        assert [m.id for m in desk.models.round_models(promotion.round_id)] == [old_id]
        assert "keeps its targets" in outcome.line(pending)


def test_a_deferred_search_that_finds_no_form_leaves_fp32_serving_and_says_why(data_dir, deferred_candidate,
                                                                              monkeypatch, capsys):
    """Through `dynadesk rounds int8`; the search itself answers "none passed" here (its own tests run it)."""
    from app.cli import main
    from local_models import int8_form
    from local_models.int8_search import Int8Search

    promotion, _, _ = promoted(data_dir, deferred_candidate)
    monkeypatch.setattr(int8_form, "search_int8", lambda *args, **kwargs: Int8Search(
        None, None, None, "0" * 64, reason="int8 not used: none of the 7 int8 recipe(s) tried passed the parity rule"))
    with pytest.raises(SystemExit) as exit_:
        main(["rounds", "int8", "--task", TASK])
    assert exit_.value.code in (0, None)
    assert "round 2 keeps the fp32 form: Int8 not used: none of the 7" in capsys.readouterr().out
    with Desk(data_dir) as desk:
        assert [m.id for m in desk.models.round_models(promotion.round_id)][0] == promotion.candidate.id
        assert pending_int8(desk) == []
        assert "none of the 7" in desk.models.get(promotion.candidate.id).provenance["int8_deferred"]["note"]
    with pytest.raises(SystemExit):
        main(["rounds", "int8"])
    assert "No open round waits for an int8 form" in capsys.readouterr().out


def test_int8_later_goes_with_desk_training_only(data_dir, tmp_path, capsys):
    from app.cli import main

    csv = tmp_path / "data.csv"
    csv.write_text("text,label\na,hate\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--data", str(csv), "--text-column", "text", "--label-column", "label", "--out",
              str(tmp_path / "out"), "--int8", "later"])
    assert exit_.value.code == 2 and "--int8 later goes with --task or --manifest" in capsys.readouterr().err
