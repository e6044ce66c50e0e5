"""An annotator's desk that wrote against its own form of the round's model before its first sync brought the
team's target (another form of the same trained model, under another checksum: this release's fused int8 of
the default model beside a 0.1/0.2 owner's plain int8) has those examples re-checked against the team's form
in the sync job: they take the team's target's output in place of the writer's, which their origin keeps, and
the server judges them with its one definition. Here the two forms are the tiny classifier's fp32 and int8 ONNX exports (one parent)."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from app.cli import cli
from app.core.desk import Desk
from app.core.services.target_models import register_model
from app.views.example import recheck_facts
from local_models.engine import load_engine
from sync.client import SyncClient
from sync.local import local_status
from sync.transport import SyncHandle, SyncReport
from tests.conftest import hate_content, hate_output
from tests.local_models.test_embeddings import tiny_onnx_dir, tiny_onnx_int8_dir  # noqa: F401  (fixtures)
from tests.sync.helpers import add_account, server_records
from tests.sync.test_client import QUICK

sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)
TEXTS = ["those people should all be sent away", "we cooked dinner for the neighbours", "nobody wants them here"]
OTHER = {"hate": "not hate", "not hate": "hate"}


def owner_publishes_round_1(folder: Path, url: str, owner, form_dir: Path) -> str:
    """The owner's desk adopts its form of the model as round 1's target; its first sync publishes it."""
    with Desk(folder) as desk:
        desk.people.create(owner.name, owner.role, person_id=owner.id)
        desk.switch_person(owner.id)
        target = register_model(desk, form_dir, name="tiny hate model, the team's form", task_code="hate_speech",
                                format="onnx")
        assert desk.rounds.adopt_first_models("hate_speech", [target.id])
        with SyncClient(desk, url, owner.token, policy=QUICK) as client:
            assert client.run().published
        return target.sha256


def annotator_writes_against_own_form(folder: Path, ann, own_dir: Path, team_dir: Path):
    """Ann's desk, before any sync: round 1's target is its own form. What she saw (her form's answers) is set
    here so that one example fools her form but not the team's, one fools both and one neither."""
    desk = Desk(folder)
    desk.people.create(ann.name, ann.role, person_id=ann.id)
    desk.switch_person(ann.id)
    own = register_model(desk, own_dir, name="tiny hate model, this desk's form", task_code="hate_speech",
                         format="onnx")
    assert desk.rounds.adopt_first_models("hate_speech", [own.id])
    team_engine = load_engine(team_dir, format="onnx", num_threads=1)
    try:
        team_labels = [p.label for p in team_engine.predict_batched(TEXTS)]
    finally:
        team_engine.close()
    # (what her form answered, the label she gave): fooled by hers only, by both, by neither
    plan = [(OTHER[team_labels[0]], team_labels[0]), (team_labels[1], OTHER[team_labels[1]]),
            (team_labels[2], team_labels[2])]
    written = [desk.examples.create(ann.id, "hate_speech", hate_content(text, label), [hate_output(own, seen)])
               for text, (seen, label) in zip(TEXTS, plan)]
    assert [x.model_fooled for x in written] == [True, True, False]
    unrelated = desk.models.register("my own model", "hf-torch", "cd" * 32, task_id=desk.tasks.task("hate_speech").id)
    lone = desk.examples.create(ann.id, "hate_speech", hate_content("against a model of my own", "hate"),
                                [hate_output(unrelated, "not hate")])
    return desk, own, written, lone, team_labels


@pytest.fixture
def accounts(server, server_db):
    return server.url, add_account(server_db, "Olga Owner", "owner"), add_account(server_db, "Ann Annotator", "annotator")


@sqlite_only
def test_examples_written_against_the_desks_own_form_count_for_the_teams_target(
        accounts, server_db, tmp_path, data_dir, tiny_onnx_dir, tiny_onnx_int8_dir):  # noqa: F811
    url, owner, ann = accounts
    team_sha = owner_publishes_round_1(tmp_path / "owner", url, owner, tiny_onnx_int8_dir)
    desk, own, written, lone, team_labels = annotator_writes_against_own_form(data_dir, ann, tiny_onnx_dir,
                                                                             tiny_onnx_int8_dir)
    assert own.sha256 != team_sha

    with SyncClient(desk, url, ann.token, policy=QUICK) as client:
        report = client.run()
    # the three re-checked went; the one against an unrelated model still waits, with the server's reason
    assert (report.rechecked, report.no_longer_fooling, report.pushed, report.deferred) == (3, 1, 3, 1), report
    assert ("3 example(s) written against this desk's own form of the round's model were re-checked against the "
            "team's target; 1 of them no longer fool it.") in report.summary()
    assert "1 wait for something the server does not have yet" in report.summary()

    on_server = server_records(server_db, ann.id)
    assert set(on_server) == {str(x.id) for x in written}
    for x, label in zip(written, team_labels):
        stored = on_server[str(x.id)]
        assert [o["model_sha256"] for o in stored["outputs"]] == [team_sha]  # the server takes the target's only
        assert stored["outputs"][0]["label"] == label
        # what the writer saw travels with the example: its form, its answer, and the judgement shown then
        rechecked = stored["origin"]["rechecked"]
        assert [(w["model_sha256"], w["name"], w["label"], w["probabilities"]) for w in rechecked["written_against"]] \
            == [(own.sha256, own.name, o.label, o.probabilities) for o in x.outputs]
        assert rechecked["model_fooled_before"] is x.model_fooled and rechecked["against"] == [team_sha]
    assert [on_server[str(x.id)]["model_fooled"] for x in written] == [False, True, False]

    # The desk holds what the server holds (the team's answer, its judgement), and shows what the writer saw.
    for x in written:
        kept = desk.examples.get(x.id)
        assert [(o.model_sha256, o.label) for o in kept.outputs] == [(team_sha, on_server[str(x.id)]["outputs"][0]["label"])]
        assert kept.model_fooled == on_server[str(x.id)]["model_fooled"]
        assert kept.origin == on_server[str(x.id)]["origin"]
    facts = dict(recheck_facts(desk.examples.get(written[0].id).origin))
    assert facts["written against"].startswith(f"{own.name}: {written[0].outputs[0].label} (")
    assert facts["written against"].endswith("— fooled when written")
    [target] = desk.models.round_models(desk.tasks.round("hate_speech", 1).id)
    by_model = {f.key: f.submitted for f in desk.stats.figures("model")}
    assert by_model[str(target.id)] == 3 and str(own.id) not in by_model  # the team's target's, as on the server
    status = local_status(desk.db, ann.id)
    assert (status.pending, status.deferred) == (1, 1)
    [waiting] = status.waiting
    assert waiting.reason == f"model {'cd' * 6}… is not published yet"
    assert waiting.fix.startswith("no command fixes it: my own model is a model of this desk only")

    with SyncClient(desk, url, ann.token, policy=QUICK) as client:  # nothing to re-check twice
        again = client.run()
    assert (again.rechecked, again.pushed, again.deferred) == (0, 0, 1)
    desk.close()
    shown = CliRunner().invoke(cli, ["sync"])
    assert shown.exit_code == 0, shown.output
    assert "Waiting:       1 record(s)" in shown.output and "no command fixes it: my own model" in shown.output


@sqlite_only
def test_a_team_target_that_cannot_run_here_leaves_the_examples_waiting_with_why(
        accounts, server_db, tmp_path, data_dir, tiny_onnx_dir, tiny_onnx_int8_dir):  # noqa: F811
    url, owner, ann = accounts
    team_sha = owner_publishes_round_1(tmp_path / "owner", url, owner, tiny_onnx_int8_dir)
    desk, own, written, _, _ = annotator_writes_against_own_form(data_dir, ann, tiny_onnx_dir, tiny_onnx_int8_dir)
    before = {x.id: [(o.model_sha256, o.label) for o in desk.examples.get(x.id).outputs] for x in written}

    def unchanged_and_waiting() -> None:
        assert {x.id: [(o.model_sha256, o.label) for o in desk.examples.get(x.id).outputs] for x in written} == before
        assert local_status(desk.db, ann.id).pending == 4
        assert server_records(server_db, ann.id) == {}

    # Without the team's target's files (a sync that fetches none): they wait, and the desk says why.
    with SyncClient(desk, url, ann.token, policy=QUICK) as client:
        report = client.run(fetch_models=False)
    assert (report.rechecked, report.pushed, report.deferred) == (0, 0, 4)
    [problem] = report.warnings
    assert problem.startswith(f"3 example(s) written against tiny hate model, this desk's form ({own.sha256[:12]}…) "
                              f"wait: they are re-checked against the team's target tiny hate model, the team's form "
                              f"({team_sha[:12]}…) of their round, but its files are not on this desk yet")
    unchanged_and_waiting()
    fix = next(w.fix for w in local_status(desk.db, ann.id).waiting if own.sha256[:12] in w.reason)
    assert fix.startswith("tiny hate model, this desk's form is this desk's own form of the round's target tiny hate "
                          "model, the team's form; the next sync re-checks these examples") and "files are not" in fix

    # With damaged files: the engine refuses them; nothing changes, and the reason is named.
    with SyncClient(desk, url, ann.token, policy=QUICK) as client:
        client.fetch_models(SyncHandle(), SyncReport())
        [target] = desk.models.round_models(desk.tasks.round("hate_speech", 1).id)
        assert target.sha256 == team_sha
        with open(Path(target.path) / "model.onnx", "ab") as damaged:
            damaged.write(b"\0damage")
        report = client.run(fetch_models=False)
    assert report.rechecked == 0 and "it could not run here" in report.warnings[0], report.warnings
    unchanged_and_waiting()

    # Its files fetched again: the next sync re-checks them and they go.
    shutil.rmtree(target.path)
    with SyncClient(desk, url, ann.token, policy=QUICK) as client:
        report = client.run()
    assert (report.rechecked, report.pushed, report.deferred) == (3, 3, 1) and not report.warnings, report
    assert set(server_records(server_db, ann.id)) == {str(x.id) for x in written}
    desk.close()


@sqlite_only
def test_examples_the_server_refused_for_an_output_of_another_form_go_once_rechecked(
        accounts, server_db, tmp_path, data_dir, tiny_classifier_dir, tiny_onnx_dir):  # noqa: F811
    """The team's round 1 names the model's PyTorch form and its owner published the ONNX form beside it (a
    prepared faster form): the server knows Ann's form, so it refuses her examples' outputs of it (not the round's
    target) instead of putting them off. Her sync re-checks them against the PyTorch form, and they go."""
    url, owner, ann = accounts
    with Desk(tmp_path / "owner") as desk:
        desk.people.create(owner.name, owner.role, person_id=owner.id)
        desk.switch_person(owner.id)
        target = register_model(desk, tiny_classifier_dir, name="tiny hate model, PyTorch", task_code="hate_speech",
                                format="hf-torch")
        faster = register_model(desk, tiny_onnx_dir, name="tiny hate model, this desk's form", task_code="hate_speech",
                                format="onnx", provenance={"parent_model": {"id": str(target.id), "sha256": target.sha256}})
        assert desk.rounds.adopt_first_models("hate_speech", [target.id])
        with SyncClient(desk, url, owner.token, policy=QUICK) as client:
            assert client.run().published
    desk, own, written, _, _ = annotator_writes_against_own_form(data_dir, ann, tiny_onnx_dir, tiny_onnx_dir)
    assert own.sha256 == faster.sha256
    known = httpx.get(f"{url}/v1/models/{own.sha256}", headers={"Authorization": f"Bearer {ann.token}"})
    assert known.status_code == 200, known.text  # so the server refuses its outputs rather than putting them off
    with SyncClient(desk, url, ann.token, policy=QUICK) as client:
        report = client.run()
    # refused by the first push, re-checked, then stored: the summary counts them as sent, not as refused
    assert (report.rechecked, report.pushed, report.rejected, report.deferred) == (3, 3, 0, 1), report
    assert not [p for p in report.problems if any(str(x.id) in p for x in written)], report.problems
    on_server = server_records(server_db, ann.id)
    assert {i: [o["model_sha256"] for o in on_server[i]["outputs"]] for i in on_server} == \
        {str(x.id): [target.sha256] for x in written}
    assert local_status(desk.db, ann.id).rejected == 0
    desk.close()
