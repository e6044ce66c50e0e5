"""Promotion: a trained candidate becomes the next round's target (``promote_candidate``, ``rounds next``).

The candidate is the tiny hate-speech trigger model's trained part (tests/model_fixtures.py), copied
first; the desk is a real SQLite desk in tmp_path whose round 1 has a registered target.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from app.core.desk import Desk
from app.core.domain import Role
from app.core.limits import free_form_problem
from app.core.next_round.comparison import ComparisonReport, Difference
from app.core.next_round.promotion import PromotionError, PromotionRefused, promote_candidate, promotion_lineage

TASK = "hate_speech"


def differences(split: str = "base-test", n: int = 2479, current: float = 0.70, candidate: float = 0.78,
                low: float = 0.02, high: float = 0.14) -> list[Difference]:
    """A split's accuracy and macro-F1 differences, the same figures for both (hand-built: known verdicts)."""
    return [Difference(split, metric, current, candidate, candidate - current, low, high, n)
            for metric in ("accuracy", "macro_f1")]


def Comparison(rows: list[Difference] | None = None, candidate_sha256: str = "") -> ComparisonReport:
    """A comparison report as the service makes it, from hand-built differences: by default one held-out
    example (too few to judge) and a base test split where the candidate is better."""
    rows = rows if rows is not None else (differences("held-out-1", 1, 1.0, 1.0, 0.0, 0.0) + differences())
    pooled = next((d for d in rows if d.split.startswith("held-out")), rows[0])
    document = {"splits": [{"key": "held-out-1", "name": "Round 1 held-out"},
                           {"key": "base-test", "name": "davidson.csv, test split (seed 13)"}],
                "predictions": [{"id": i, "label": "hate"} for i in range(3)]}
    return ComparisonReport(TASK, candidate_sha256, ("aa" * 32,), tuple(rows), pooled, document)


# The team run: one held-out example (100 % -> 100 %), the base test split measurably worse.
WORSE = differences("held-out-1", 1, 1.0, 1.0, 0.0, 0.0) + differences(current=0.920, candidate=0.912, low=-0.013,
                                                                      high=-0.001)


@pytest.fixture
def candidate_dir(hate_trigger_model_dir, tmp_path) -> Path:
    """A private copy of the trained part `dynadesk train` would write, with a manifest beside it."""
    part = hate_trigger_model_dir.parent.parent / "parts" / "hate-trigger"
    target = tmp_path / "candidate"
    shutil.copytree(part, target)
    manifest = {"seed": 3, "options": {"from": "target", "round_share": 0.25}, "parent_model_sha256": "aa" * 32,
                "dynadesk_version": "0.1.0", "metrics": {"macro_f1": 0.9},
                "splits": {"train": [f"id-{i}" for i in range(3000)]}}  # large: named in the lineage, not copied
    (target / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return target


def set_up_desk(data_dir: Path, role: Role = Role.OWNER):
    """Round 1 of hate speech open with one (file-less) target; the working profile has ``role``."""
    with Desk(data_dir) as desk:
        task = desk.tasks.task(TASK)
        person = desk.people.create("Lee Lead", role)
        owner = desk.people.create("Olga Owner", Role.OWNER)
        desk.switch_person(person.id)
        old = desk.models.register("round-1 target", "onnx", "aa" * 32, task_id=task.id)
        desk.rounds.set_models(desk.tasks.round(TASK, 1).id, owner.id, [old.id])
        return old.id


def state(desk) -> tuple:
    """What a refused promotion must leave as it was: rounds (status, revision, targets) and model records."""
    rounds = [(r.number, r.status, r.revision, [m.id for m in desk.models.round_models(r.id)])
              for r in desk.tasks.rounds(TASK)]
    return rounds, sorted((m.sha256, m.revision) for m in desk.models.all())


def cli(*args: str) -> int:
    from app.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in args])
    return int(exit_.value.code or 0)


def test_promotion_closes_the_round_and_opens_the_next_with_the_candidate_and_its_lineage(data_dir, candidate_dir):
    old_id = set_up_desk(data_dir)
    with Desk(data_dir) as desk:
        round_1 = desk.tasks.round(TASK, 1)
        promotion = promote_candidate(desk, TASK, candidate_dir, with_current=True, comparison=Comparison())

        assert (promotion.previous_round, promotion.round_number) == (1, 2)
        closed, opened = desk.tasks.rounds(TASK)
        assert closed.status == "closed" and closed.closed_at is not None and closed.revision > round_1.revision
        assert opened.status == "open" and opened.id == promotion.round_id
        # the candidate first, then the old target: an ensemble in load order
        assert [m.id for m in desk.models.round_models(opened.id)] == [promotion.candidate.id, old_id]
        assert [m.id for m in promotion.targets] == [promotion.candidate.id, old_id]
        # registered like the default model: ONNX, parity-checked, naming its PyTorch parent
        candidate = desk.models.get(promotion.candidate.id)
        assert promotion.onnx and candidate.format == "onnx" and promotion.parity_note
        parent = candidate.provenance["parent_model"]["sha256"]
        assert any(m.sha256 == parent and m.format == "hf-torch" for m in desk.models.all())

        lineage = promotion_lineage(candidate)
        assert lineage is not None and lineage == promotion.lineage
        assert [p["sha256"] for p in lineage["parent_models"]] == ["aa" * 32]
        assert lineage["promoted_by"]["name"] == "Lee Lead" and lineage["forced"] is False
        assert lineage["round"] == 2 and lineage["previous_round"] == 1 and lineage["with_current"] is True
        manifest = lineage["manifest"]
        assert manifest["sha256"] and manifest["fields"]["seed"] == 3 and manifest["omitted_fields"] == ["splits"]
        assert manifest["contents"]["splits"]["train"][0] == "id-0"  # small enough to keep whole
        assert lineage["comparison"]["summary"] and not lineage["verdict"]["refused"]
        assert [(s["split"], s["state"]) for s in lineage["verdict"]["splits"]] == [("held-out-1", "too few"),
                                                                                   ("base-test", "better")]
        assert free_form_problem("provenance", candidate.provenance) is None  # a server takes the record
        # what `dynadesk sync publish hate_speech --round 2` sends (the task, both rounds, their targets) fits a server
        from sync.outgoing import unfit_published

        published = desk.models.round_models(closed.id) + desk.models.round_models(opened.id)
        assert unfit_published(desk.tasks.task(TASK), published, [closed, opened], [], {}) == []

        # the same candidate cannot be promoted twice; a later worse comparison is refused onto its record
        before = state(desk)
        with pytest.raises(PromotionRefused) as refused:
            promote_candidate(desk, TASK, candidate_dir,
                              comparison=Comparison(WORSE, candidate_sha256=candidate.sha256))
        assert state(desk)[0] == before[0]
        assert "-0.8 pt [-1.3, -0.1]" in str(refused.value) and "--force" in str(refused.value)
        assert "Round 1 held-out: too few to judge (n = 1; at least 97)" in str(refused.value)
        refusals = desk.models.get(candidate.id).provenance["promotion_refusals"]
        assert refusals[-1]["summary"] == refused.value.lines
        with pytest.raises(PromotionError, match="already a target"):
            promote_candidate(desk, TASK, candidate_dir, force=True, reason="once more")
        assert state(desk)[0] == before[0]


def comparison_document(rows: list[Difference], candidate_sha256: str) -> dict:
    """A stored report in the comparison service's layout (comparison.json)."""
    return {"format": "dynadesk-comparison", "task": TASK, "pooled": vars(rows[0]), "differences": [vars(d) for d in rows],
            "candidate": {"sha256": candidate_sha256}, "current": {"members": [{"sha256": "aa" * 32}]},
            "splits": [{"key": "held-out-1", "name": "Round 1 held-out"},
                       {"key": "base-test", "name": "davidson.csv, test split (seed 13)"}]}


def test_rounds_next_refuses_a_worse_candidate_with_the_figures_and_force_overrides_it(
        data_dir, candidate_dir, hate_trigger_model_dir, tmp_path, capsys, caplog):
    from local_models.engine import model_sha256

    old_id = set_up_desk(data_dir)
    # the fixture assembled the same trained part: the sha256 the comparison gives the candidate
    report = tmp_path / "comparison.json"
    report.write_text(json.dumps(comparison_document(WORSE, model_sha256(hate_trigger_model_dir))), encoding="utf-8")
    of_another_model = tmp_path / "other" / "comparison.json"
    of_another_model.parent.mkdir()
    of_another_model.write_text(json.dumps(comparison_document(WORSE, "ff" * 32)), encoding="utf-8")
    with Desk(data_dir) as desk:
        before = state(desk)

    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir, "--comparison", report) == 1
    err = capsys.readouterr().err
    from app.core.next_round.comparison import read_report

    figures = read_report(report).summary_lines()  # as the comparison service words them
    assert "worse than the current target" in err and "--force" in err and all(line in err for line in figures)
    assert "davidson.csv, test split (seed 13)" in figures[0]  # the sentence names the worst split
    assert "-0.8 pt [-1.3, -0.1]" in figures[-1] and "n = 2,479" in figures[-1]  # difference and its interval
    assert "too few to judge (n = 1; at least 97)" in figures[1]
    refusal_logged = [r.getMessage() for r in caplog.records if r.name == "app.core.next_round.promotion"]
    assert any("refused" in line and figures[-1] in line for line in refusal_logged)  # the desk log keeps it
    with Desk(data_dir) as desk:
        assert state(desk) == before  # nothing registered, no round changed

    # a report about another model is no reason to promote this one, forced or not
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir, "--comparison", of_another_model.parent,
               "--force", "--reason", "x") == 1
    assert "The comparison is of another model (ffffffffffff)" in capsys.readouterr().err
    with Desk(data_dir) as desk:
        assert state(desk)[0] == before[0]

    # promoting anyway asks why; without a reason nothing changes
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir, "--comparison", report, "--force") == 1
    assert "needs a reason" in capsys.readouterr().err
    with Desk(data_dir) as desk:
        assert state(desk)[0] == before[0]
    reason = "Davidson's test split is older slang; the round's data is what we need now"
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir, "--comparison", report, "--force",
               "--reason", reason) == 0
    out = capsys.readouterr().out
    assert "Closed hate_speech round 1." in out and "Opened hate_speech round 2" in out and "Parity check:" in out
    assert "Promoted anyway" in out and reason in out and "dynadesk sync publish hate_speech --round 2" in out
    with Desk(data_dir) as desk:
        closed, opened = desk.tasks.rounds(TASK)
        targets = desk.models.round_models(opened.id)
        assert closed.status == "closed" and opened.status == "open" and old_id not in [m.id for m in targets]
        lineage = promotion_lineage(targets[0])
        assert lineage is not None and lineage["forced"] is True
        assert lineage["override"]["refused_because"] == figures and lineage["override"]["reason"] == reason
        assert lineage["verdict"]["worst"] == "base-test" and lineage["verdict"]["refused"] is True
        base = next(s for s in lineage["comparison"]["splits"] if s["split"] == "base-test")
        assert base["state"] == "worse" and base["figures"][0]["high"] == -0.001 and base["items"] == 2479
        assert lineage["comparison"]["worse"] is True


def test_a_broken_candidate_is_refused_clearly_and_changes_nothing(data_dir, candidate_dir, tmp_path, capsys):
    set_up_desk(data_dir)
    with Desk(data_dir) as desk:
        before = state(desk)
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    assert cli("rounds", "next", "--task", TASK, "--model", empty) == 1
    assert "is not a trained candidate" in capsys.readouterr().err
    report = tmp_path / "comparison.json"
    report.write_text(json.dumps({"pooled": {"split": "held-out", "metric": "accuracy"}}), encoding="utf-8")
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir, "--comparison", report) == 1
    assert "is not a comparison report" in capsys.readouterr().err

    weights = next(p for p in candidate_dir.iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes()[:100])  # cut short, as by a full disk
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir) == 1
    err = capsys.readouterr().err
    assert "is not a usable model" in err and "truncated or damaged" in err and "Traceback" not in err
    with Desk(data_dir) as desk:
        assert state(desk)[0] == before[0]
        assert [m.sha256 for m in desk.models.all()] == ["aa" * 32]


def test_an_annotator_may_not_promote(data_dir, candidate_dir, capsys):
    set_up_desk(data_dir, Role.ANNOTATOR)
    with Desk(data_dir) as desk:
        before = state(desk)
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir) == 1
    assert "Only owners (and leads, where the task's owner allows it) can promote" in capsys.readouterr().err
    with Desk(data_dir) as desk:
        assert state(desk) == before


def test_a_lead_promotes_only_where_the_task_lets_leads_promote(data_dir, candidate_dir, capsys):
    from app.core.next_round.promotion import PromotionPolicy, check_promotable, store_promotion_policy

    set_up_desk(data_dir, Role.LEAD)
    with Desk(data_dir) as desk:
        # on a desk of its own the lead decides; one that syncs with a team server follows the owner's policy
        assert check_promotable(desk, candidate_dir, task_code=TASK).role == Role.LEAD
        desk.settings.server_url = "http://127.0.0.1:9"
        desk.save_settings()
        before = state(desk)
    assert cli("rounds", "next", "--task", TASK, "--model", candidate_dir, "--force", "--reason", "x") == 1
    err = capsys.readouterr().err
    assert "does not let leads promote" in err and "dynadesk rounds propose --task hate_speech" in err
    with Desk(data_dir) as desk:
        assert state(desk) == before
        store_promotion_policy(desk, PromotionPolicy(TASK, leads_may_promote=True, set_by="Olga Owner"))
        assert check_promotable(desk, candidate_dir, task_code=TASK).role == Role.LEAD
        store_promotion_policy(desk, PromotionPolicy(TASK, leads_may_promote=False))
        with pytest.raises(PromotionError, match="does not let leads promote"):
            promote_candidate(desk, TASK, candidate_dir, force=True, reason="x")
        assert state(desk) == before


def test_a_candidate_whose_onnx_export_fails_its_parity_check_serves_as_pytorch(data_dir, candidate_dir, monkeypatch,
                                                                                  tmp_path):
    import local_models.export
    from local_models.errors import ParityCheckFailed

    def disagreeing_export(*args, **kwargs):
        raise ParityCheckFailed("the exported model differs by 0.31 (allowed: 0.02)", 0.31)

    monkeypatch.setattr(local_models.export, "export_onnx", disagreeing_export)
    set_up_desk(data_dir)
    large = tmp_path / "elsewhere" / "manifest.json"  # 20,000 example ids and text hashes: over a MiB
    large.parent.mkdir()
    large.write_text(json.dumps({"seed": 7, "data": {f"id-{i}": "ab" * 32 for i in range(20_000)}}), encoding="utf-8")
    with Desk(data_dir) as desk:
        with pytest.raises(PromotionRefused, match="no comparison"):  # nothing to judge by: refused as well
            promote_candidate(desk, TASK, candidate_dir, manifest=large)
        promotion = promote_candidate(desk, TASK, candidate_dir, manifest=large, force=True,
                                      reason="compared by hand on the team's sheet")
        candidate = desk.models.get(promotion.candidate.id)
        manifest = promotion_lineage(candidate)["manifest"]
        assert manifest["path"] == str(large.resolve()) and manifest["fields"] == {"seed": 7}
        assert manifest["omitted_fields"] == ["data"] and "contents" not in manifest  # known by its sha256
        assert manifest["sha256"] == hashlib.sha256(large.read_bytes()).hexdigest()
        assert not promotion.onnx and candidate.format == "hf-torch"
        assert "differs by 0.31" in promotion.parity_note and promotion.parity_note in candidate.provenance["notes"]
        assert promotion_lineage(candidate)["export"] == {"onnx": False, "note": promotion.parity_note}
        assert [m.id for m in desk.models.round_models(promotion.round_id)] == [candidate.id]
