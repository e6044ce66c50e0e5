"""Every fix the desk prints for work that waits is run as printed, and the reason it named goes away.

`dynadesk sync` lists why the server put records off and, for each reason, "fix: … `dynadesk …`". These
tests read that command from the desk's own words, run it (as the person it names), sync again and check
that the reason is gone: a fix that changes nothing fails here. Reasons only a person can settle say so,
and the tests check that sentence.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from app.cli import cli
from tests.app.test_stats import csv_slice
from tests.conftest import hate_content, hate_output, shared_file

sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)
FIX = re.compile(r"^ +(?P<count>[\d,]+) because (?P<reason>.+)\n +fix: (?P<fix>.+)$", re.MULTILINE)
COMMAND = re.compile(r"`dynadesk ([^`]+)`")


def run(data_dir, *args: str, input: str | None = None):
    result = CliRunner().invoke(cli, ["--data-dir", str(data_dir), *args], input=input)
    assert result.exit_code == 0, result.output
    return result


def waiting(data_dir) -> dict[str, str]:
    """reason -> fix, as `dynadesk sync` prints them."""
    return {m["reason"]: m["fix"] for m in FIX.finditer(run(data_dir, "sync").output)}


def configure(data_dir, url: str, token: str) -> None:
    run(data_dir, "sync", "configure", "--url", url, "--token-stdin", input=token + "\n")


def follow_fixes(data_dir, *, runs_on, limit: int = 4) -> list[str]:
    """Run each printed fix (on the desk ``runs_on`` says: the owner's, for an owner's fix), sync again, and
    check its reason went away; returns the reasons met. Fails on a reason that stays after its fix."""
    met: list[str] = []
    for _ in range(limit):
        reasons = waiting(data_dir)
        if not reasons:
            return met
        reason, fix = next(iter(reasons.items()))
        command = COMMAND.search(fix)
        assert command, f"'{reason}': its fix names no command: {fix}"
        run(runs_on(fix), *command[1].split())
        run(data_dir, "sync", "--now")
        assert reason not in waiting(data_dir), f"ran `dynadesk {command[1]}` as printed; still waiting: {reason}"
        met.append(reason)
    raise AssertionError(f"still waiting after {limit} fixes: {waiting(data_dir)}")


@sqlite_only
def test_an_owners_imported_anli_set_goes_out_once_the_printed_fixes_are_run(team, tmp_path):
    """Import ANLI, share it and sync: the work waits for the task, then for the data set's own model
    (ANLI's adversary, not a round target); `dynadesk sync publish nli` publishes both."""
    owner = tmp_path / "owner"
    anli = csv_slice(shared_file("anli", "ANLI_analysis_r1_dev.csv"), tmp_path / "anli.csv", 6)
    run(owner, "import", "--format", "anli", str(anli))
    configure(owner, team.url, team.owner.token)
    run(owner, "sync", "share-imported")
    run(owner, "sync", "--now")
    met = follow_fixes(owner, runs_on=lambda fix: owner)
    # the one publish sends the task, its round and the data set's own model (ANLI's adversary): nothing else waits
    assert met == ["task 'nli' is not published on this server yet"]
    assert "Waiting:       0 record(s)" in run(owner, "sync").output
    # pulled on a second desk: the imported examples arrive there and count apart from MER
    ann = tmp_path / "ann"
    configure(ann, team.url, team.ann.token)
    run(ann, "sync", "--now")
    shown = run(ann, "stats", "--task", "nli", "--json").output
    rows = json.loads(shown)["task"]
    assert [(r["submitted"], r["imported"], r["mer"]) for r in rows] == [(0, 6, None)]


@sqlite_only
def test_publish_then_share_then_sync_leaves_nothing_waiting(team, tmp_path):
    owner = tmp_path / "owner"
    anli = csv_slice(shared_file("anli", "ANLI_analysis_r1_dev.csv"), tmp_path / "anli.csv", 5)
    run(owner, "import", "--format", "anli", str(anli))
    configure(owner, team.url, team.owner.token)
    published = run(owner, "sync", "publish", "nli")
    assert "deferred" not in published.output.replace("0 deferred", "")
    assert "5 imported record(s)" in run(owner, "sync", "share-imported").output
    run(owner, "sync", "--now")
    shown = run(owner, "sync").output
    assert "Waiting:       0 record(s)" in shown and "because" not in shown


@sqlite_only
def test_an_unpublished_round_waits_until_the_owner_runs_the_printed_publish(team, tmp_path):
    """Ann writes in round 3, which only her desk has; the fix names the owner's publish of round 3."""
    from app.core.desk import Desk
    from app.core.storage.models import RoundModel
    from tests.sync.helpers import MODEL_SHA, prepare_desk

    ann, owner = tmp_path / "ann", tmp_path / "owner"
    with prepare_desk(ann, team.ann) as desk:
        model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
        desk.tasks.get_or_create_round("hate_speech", 3)
        desk.examples.create(team.ann.id, "hate_speech", hate_content("written in round three", "hate"),
                             [hate_output(model, "not hate")], round_number=3)
    configure(ann, team.url, team.ann.token)
    run(ann, "sync", "--now")
    with prepare_desk(owner, team.owner) as desk:  # the owner's desk: round 3 with the same target
        model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
        round3 = desk.tasks.get_or_create_round("hate_speech", 3)
        with desk.db.write() as session:
            session.add(RoundModel(round_id=round3.id, model_id=model.id, position=0))
    configure(owner, team.url, team.owner.token)
    met = follow_fixes(ann, runs_on=lambda fix: owner if fix.startswith("the owner") else ann)
    assert met == ["round 3 of 'hate_speech' is not published yet"]
    with Desk(ann) as desk:
        assert desk.db.get_meta("sync.person") == str(team.ann.id)


@sqlite_only
def test_a_model_only_this_desk_has_says_no_command_fixes_it(team, tmp_path):
    """Examples written against a model that is no round's target: no publish sends it; the desk says so
    instead of printing a publish that changes nothing."""
    from tests.sync.helpers import prepare_desk

    ann = tmp_path / "ann"
    with prepare_desk(ann, team.ann) as desk:
        mine = desk.models.register("my own model", "hf-torch", "cd" * 32, task_id=desk.tasks.task("hate_speech").id)
        desk.examples.create(team.ann.id, "hate_speech", hate_content("against my own model", "hate"),
                             [hate_output(mine, "not hate")], round_number=2)
    configure(ann, team.url, team.ann.token)
    run(ann, "sync", "--now")
    [(reason, fix)] = waiting(ann).items()
    assert reason == "model cdcdcdcdcdcd… is not published yet"
    assert fix.startswith("no command fixes it: my own model is a model of this desk only") and "`" not in fix


@sqlite_only
def test_a_context_the_server_lacks_waits_until_the_owner_publishes_the_round_again(team, tmp_path):
    """A lead writes from a prompt her desk imported; the owner imports the same prompts after publishing
    round 2: the printed publish of round 2 again sends it, and the lead's example goes out."""
    from sqlalchemy import select

    from app.core.storage.models import Context, RoundModel
    from tests.sync.helpers import MODEL_SHA, prepare_desk

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Write about your neighbours.\n", encoding="utf-8")
    lead, owner = tmp_path / "lead", tmp_path / "owner"
    with prepare_desk(lead, team.lead) as desk:
        model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
        round2 = desk.tasks.round("hate_speech", 2)
        desk.rounds.import_contexts(round2.id, team.lead.id, prompts)
        with desk.db.read() as session:
            context_id = session.scalar(select(Context.id).where(Context.round_id == round2.id))
        desk.examples.create(team.lead.id, "hate_speech", hate_content("my neighbours are vermin", "hate"),
                             [hate_output(model, "not hate")], round_number=2, context_id=context_id)
    configure(lead, team.url, team.lead.token)
    run(lead, "sync", "--now")
    with prepare_desk(owner, team.owner) as desk:  # the owner's round 2, published before, now with the prompts
        model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
        round2 = desk.tasks.round("hate_speech", 2)
        with desk.db.write() as session:
            session.add(RoundModel(round_id=round2.id, model_id=model.id, position=0))
        desk.rounds.import_contexts(round2.id, team.owner.id, prompts)
    configure(owner, team.url, team.owner.token)
    met = follow_fixes(lead, runs_on=lambda fix: owner if fix.startswith("the owner") else lead)
    assert met == ["its context is not published in round 2 yet"]


def test_reasons_no_command_fixes_say_who_settles_them():
    """A validation or review waits for its example: no command of this desk's person fixes that."""
    from sync.local import fix_for

    fix = fix_for("deferred: example 1b2c3d is not on the server yet", "hate_speech")
    assert fix == "its example goes first; it waits for the example's own reason, or the example's author must sync"
    assert not COMMAND.search(fix)
