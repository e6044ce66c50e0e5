"""The default model across the version gap, for real: the previous release (tests/previous_release.py) builds
the bundled model's int8 form from its own recipe (plain graph, outlier channels in float) and this release
from its own (the fused graph): the same model in two forms whose probabilities differ slightly, under two
checksums. A team has one target per round, named by checksum, and one definition of "fooled" (the server
judges every example with it): whichever form the team's round names, every desk predicts with that form's
files, and every example, from either release, counts for that one target, on the server and on each desk.

An old owner's desk adopts its own form and publishes round 1 with it; a new annotator's desk, which adopted its
own (other) form on its first start and wrote against it before its first sync, takes the team's from the server
(that sync re-checks what it wrote against the team's form) and writes against it; the owner's desk is
then upgraded in place, prepares this release's form as well (as `evaluate --models default` does) and keeps the
team's target as it was: its files, its checksum, its answers.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from app.core import paths
from app.core.desk import Desk
from app.core.services import default_model_forms
from app.core.services.target_models import ensure_default_model, load_engine_for, to_model_output
from app.core.storage.models import Example, ModelOutputRow
from sync.client import SyncClient
from sync.server import models as server_models
from tests.conftest import hate_content
from tests.previous_release import PreviousRelease, PreviousReleaseUnavailable, previous_release
from tests.sync.helpers import add_account
from tests.sync.test_client import QUICK

pytestmark = pytest.mark.slow

# Python run inside the previous release: one desk, the steps given as JSON; prints what each step returns.
OLD_DESK = r'''
import json, sys, uuid
from sqlalchemy import select
from app.core.desk import Desk
from app.core.services.target_models import load_engine_for, to_model_output
from app.core.storage.models import Example
from app.core.tasks.content import Content
from sync.client import SyncClient

steps = json.loads(sys.argv[1])
desk = Desk(steps[0]["dir"])
out = []
for step in steps[1:]:
    op = step["op"]
    if op == "targets":  # a round's targets, as this desk's records name them
        round_ = desk.tasks.round("hate_speech", step.get("round", 1))
        out.append([{"sha256": m.sha256, "name": m.name, "path": m.path, "provenance": m.provenance}
                    for m in desk.models.round_models(round_.id)])
    elif op == "write":  # as the workspace does: the round's targets answer the text, and the example keeps it
        round_ = desk.tasks.round("hate_speech", step.get("round", 1))
        records = desk.models.round_models(round_.id)
        written = []
        for text in step["texts"]:
            outputs = []
            for record in records:
                engine = load_engine_for(record, num_threads=1)
                outputs.append(to_model_output(engine.predict_one(text), record))
                engine.close()
            content = Content({"text": text}, "hate", meta={"hate_type": "derogation", "target_groups": ["women"],
                                                          "label_explanation": "because"})
            example = desk.examples.create(uuid.UUID(step["author"]), "hate_speech", content, outputs,
                                           round_number=round_.number)
            written.append({"id": str(example.id), "outputs": [{"sha256": o.model_sha256,
                                                               "probabilities": o.probabilities} for o in outputs]})
        out.append(written)
    elif op == "sync":
        with SyncClient(desk, step["url"], step["token"]) as client:
            out.append(client.run().summary())
    elif op == "fooled":
        with desk.db.read() as session:
            out.append({str(e.id): e.model_fooled for e in session.scalars(select(Example))})
    elif op == "figures":  # MER's counts per target model, as `dynadesk stats --by model` shows them
        out.append([{"key": f.key, "submitted": f.submitted, "fooled": f.fooled}
                    for f in desk.stats.figures("model")])
desk.close()
print(json.dumps(out))
'''

TEXTS_OLD = ["women are vermin and should be removed", "I love my family"]
TEXTS_NEW = ["those women should go back where they came from", "we made dinner for the neighbours"]
TEXTS_BEFORE_SYNC = ["they are animals and should be locked up", "what a lovely morning at the beach"]


@pytest.fixture(scope="module")
def previous() -> PreviousRelease:
    try:
        return previous_release()
    except PreviousReleaseUnavailable as exc:
        pytest.skip(str(exc))


def old_desk(previous: PreviousRelease, folder: Path, *steps: dict) -> list:
    return json.loads(previous.script(OLD_DESK, json.dumps([{"dir": str(folder)}, *steps]), timeout=600))


def write_against_round(desk: Desk, author: uuid.UUID, texts: list[str], number: int = 1) -> list[dict]:
    """As the workspace does: the round's targets answer each text, and the example keeps their answers."""
    records = desk.models.round_models(desk.tasks.round("hate_speech", number).id)
    written = []
    for text in texts:
        outputs = []
        for record in records:
            engine = load_engine_for(record, num_threads=1)
            outputs.append(to_model_output(engine.predict_one(text), record))
            engine.close()
        example = desk.examples.create(author, "hate_speech", hate_content(text, "hate"), outputs, round_number=number)
        written.append({"id": str(example.id), "outputs": [{"sha256": o.model_sha256, "probabilities": o.probabilities}
                                                           for o in outputs]})
    return written


def desk_fooled(desk: Desk) -> dict[str, bool | None]:
    with desk.db.read() as session:
        return {str(e.id): e.model_fooled for e in session.scalars(select(Example))}


def output_models(desk: Desk) -> set[str]:
    with desk.db.read() as session:
        return set(session.scalars(select(ModelOutputRow.model_sha256)))


def test_both_releases_default_model_forms_count_for_the_one_target_the_team_has(previous, team_server, tmp_path,
                                                                                default_model_cache):
    owner = add_account(team_server.db, "Olga Owner", "owner", "A")
    ann = add_account(team_server.db, "Ann Annotator", "annotator", "A")
    old_dir = tmp_path / "old-owner"

    # The old owner's desk: set up from its command line; its first start's model is its own int8 form.
    previous.run("sync", "configure", "--url", team_server.url, "--token-stdin", data_dir=old_dir,
                 input=owner.token + "\n")
    previous.run("init", data_dir=old_dir, timeout=900)
    [[old_form], published] = old_desk(previous, old_dir, {"op": "targets"},
                                       {"op": "sync", "url": team_server.url, "token": owner.token})
    assert old_form["provenance"]["default_model"] and "ONNX int8" in old_form["name"]
    assert "hate_speech" in published, published  # its first sync published round 1 with its target

    # A new annotator's desk ran its own first start too: this release's form, another checksum.
    new = Desk(tmp_path / "ann")
    new.people.create(ann.name, ann.role, person_id=ann.id)
    new.switch_person(ann.id)
    shutil.copytree(default_model_cache, paths.models_cache_dir(new.root))  # prepared once per test run
    default_model_forms.prepare_torch_files(new)
    assert default_model_forms.adopt_torch_form(new) is not None
    own = default_model_forms.switch_to_fast_form(new, default_model_forms.prepared_fast_files(new))
    assert own is not None and own.sha256 != old_form["sha256"]  # the two releases' forms differ
    assert own.provenance["export"]["int8_recipe"]["fused"] and not old_form["provenance"]["export"]["int8_recipe"].get(
        "fused")

    # Before its first sync it wrote against its own form; that sync re-checks those examples against the team's.
    before_sync = write_against_round(new, ann.id, TEXTS_BEFORE_SYNC)
    assert {o["sha256"] for w in before_sync for o in w["outputs"]} == {own.sha256}

    # Its first sync: round 1's target is the team's (the old form), whose files it fetches and answers with.
    with SyncClient(new, team_server.url, ann.token, policy=QUICK) as client:
        first = client.run()
        assert (first.rechecked, first.pushed, first.deferred) == (len(TEXTS_BEFORE_SYNC),) * 2 + (0,), first
        assert "re-checked against the team's target" in first.summary()
        [target] = new.models.round_models(new.tasks.round("hate_speech", 1).id)
        assert target.sha256 == old_form["sha256"] and Path(target.path).is_dir()
        new_written = write_against_round(new, ann.id, TEXTS_NEW)
        assert client.run().pushed == len(TEXTS_NEW)
    assert {o["sha256"] for w in new_written for o in w["outputs"]} == {old_form["sha256"]}

    # The old owner writes against its own round 1 and takes the annotator's examples.
    [old_written, summary, fooled_on_old, figures_on_old] = old_desk(
        previous, old_dir, {"op": "write", "author": str(owner.id), "texts": TEXTS_OLD},
        {"op": "sync", "url": team_server.url, "token": owner.token}, {"op": "fooled"}, {"op": "figures"})
    assert summary.startswith(f"Pushed {len(TEXTS_OLD)} new record(s)"), summary

    # One target, one judgement: the server counts every example for the old form, judged by the one definition,
    # and each desk holds the server's judgement.
    with team_server.db.read() as session:
        [model] = session.scalars(select(server_models.ModelRecord).where(
            server_models.ModelRecord.sha256 == old_form["sha256"])).all()
        [round_1] = session.scalars(select(server_models.Round).where(server_models.Round.number == 1)).all()
        assert round_1.target_models == [str(model.id)]
        stored = {str(e.id): e for e in session.scalars(select(server_models.Example))}
    written = before_sync + new_written + old_written
    assert set(stored) == {w["id"] for w in written}
    for w in written:
        example = stored[w["id"]]
        assert example.model_fooled is not None, w  # judged: its output is the round's target's
        assert [o["model_sha256"] for o in example.outputs] == [old_form["sha256"]]
        assert example.model_fooled == (example.outputs[0]["label"] != "hate")  # hate written; fooled = "not hate"
    on_server = {i: e.model_fooled for i, e in stored.items()}
    new.close()
    with Desk(tmp_path / "ann") as again, SyncClient(again, team_server.url, ann.token, policy=QUICK) as client:
        client.run()
        assert desk_fooled(again) == on_server == fooled_on_old
        assert output_models(again) == {old_form["sha256"]}
        [by_model] = again.stats.figures("model", round_id=again.tasks.round("hate_speech", 1).id)
        assert by_model.key == str(target.id) and by_model.submitted == len(written)
        assert by_model.fooled == sum(bool(f) for f in on_server.values())
    assert [(row["submitted"], row["fooled"]) for row in figures_on_old] == [(by_model.submitted, by_model.fooled)]

    # The owner's desk is upgraded in place. Preparing this release's form (as `evaluate --models default` does)
    # builds it beside the team's target, never over it: round 1 keeps its target, its files and its answers.
    with Desk(old_dir) as upgraded:
        newer = ensure_default_model(upgraded)
        assert newer.sha256 == own.sha256 and newer.path != old_form["path"]
        [kept] = upgraded.models.round_models(upgraded.tasks.round("hate_speech", 1).id)
        assert kept.sha256 == old_form["sha256"] and kept.path == old_form["path"]
        engine = load_engine_for(kept, num_threads=1)  # its files are the ones registered
        try:
            answered = engine.predict_one(TEXTS_OLD[0]).probabilities
        finally:
            engine.close()
        assert answered == pytest.approx(old_written[0]["outputs"][0]["probabilities"], abs=1e-6)
        with SyncClient(upgraded, team_server.url, owner.token, policy=QUICK) as client:
            client.run()
            upgraded_written = write_against_round(upgraded, owner.id, ["one more after the upgrade"])
            assert client.run().pushed == 1
        assert {o["sha256"] for o in upgraded_written[0]["outputs"]} == {old_form["sha256"]}
        assert desk_fooled(upgraded)[upgraded_written[0]["id"]] is not None

        # Round 2 takes this release's form as its target: an old annotator's desk fetches it and answers with it
        # (the fused graph runs on the previous release's runtime), and its examples count for it.
        round_2 = upgraded.tasks.get_or_create_round("hate_speech", 2)
        upgraded.rounds.set_models(round_2.id, owner.id, [newer.id])
        with SyncClient(upgraded, team_server.url, owner.token, policy=QUICK) as client:
            assert {r.status for r in client.publish("hate_speech", [2]).results} <= {"stored", "already_stored"}
        engine = load_engine_for(newer, num_threads=1)
        try:
            expected = engine.predict_one(TEXTS_NEW[0]).probabilities
        finally:
            engine.close()
    bob = add_account(team_server.db, "Bob Annotator", "annotator", "A")
    bob_dir = tmp_path / "old-annotator"
    previous.run("sync", "configure", "--url", team_server.url, "--token-stdin", data_dir=bob_dir,
                 input=bob.token + "\n")
    _, [round_2_target], [bobs], summary = old_desk(
        previous, bob_dir, {"op": "sync", "url": team_server.url, "token": bob.token}, {"op": "targets", "round": 2},
        {"op": "write", "author": str(bob.id), "texts": TEXTS_NEW[:1], "round": 2},
        {"op": "sync", "url": team_server.url, "token": bob.token})
    assert round_2_target["sha256"] == own.sha256 and summary.startswith("Pushed 1 new record(s)"), summary
    assert [o["sha256"] for o in bobs["outputs"]] == [own.sha256]
    assert bobs["outputs"][0]["probabilities"] == pytest.approx(expected, abs=1e-6)  # the same form, the same answer
    with team_server.db.read() as session:
        example = session.get(server_models.Example, uuid.UUID(bobs["id"]))
        assert example.model_fooled is not None and [o["model_sha256"] for o in example.outputs] == [own.sha256]
