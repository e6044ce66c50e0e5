"""`dynadesk serve` and `dynadesk sync` as a person types them: tokens printed once and stored
only as hashes, the token kept out of settings.json, syncing and its status, readable errors."""

from __future__ import annotations

import io
import json
import sys

import pytest
from click.testing import CliRunner

from app.cli import cli
from tests.cli_in_process import Ran, run_dynadesk
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import ProcessServer, server_counts, server_database


def dynadesk(*args, data_dir, input=None) -> Ran:
    """The real command, as a person runs it (errors end as messages and exit codes), in this process."""
    return run_dynadesk("--data-dir", data_dir, *args, input=input)


def test_a_team_sets_up_and_syncs_from_the_command_line(tmp_path):
    server_dir = tmp_path / "server-home"
    added = dynadesk("serve", "add-person", "Olga Owner", "--role", "owner", "--team", "Research", data_dir=server_dir)
    assert added.returncode == 0, added.stderr
    owner_token = added.stdout.strip()
    assert owner_token.startswith("ddk_") and "shown only now" in added.stderr
    added = dynadesk("serve", "add-person", "Ann Annotator", "--role", "annotator", "--team", "Research",
                     data_dir=server_dir)
    ann_token = added.stdout.strip()
    database = server_dir / "server" / "server.sqlite"
    raw = database.read_bytes() + (database.with_name("server.sqlite-wal").read_bytes()
                                   if database.with_name("server.sqlite-wal").exists() else b"")
    assert owner_token.encode() not in raw and ann_token.encode() not in raw  # only hashes are kept
    people = dynadesk("serve", "people", data_dir=server_dir)
    assert "Ann Annotator" in people.stdout and "annotator" in people.stdout and "ddk_" not in people.stdout
    bad = dynadesk("serve", "add-person", "Eve", "--role", "owner", "--team", "no/slashes", data_dir=server_dir)
    assert bad.returncode == 1 and "team name" in bad.stderr and "Traceback" not in bad.stderr

    server = ProcessServer(f"sqlite:///{database}", server_dir / "server")
    try:
        server.start()
        owner_desk, ann_desk = tmp_path / "owner-desk", tmp_path / "ann-desk"
        configured = dynadesk("sync", "configure", "--url", server.url, "--token-stdin", data_dir=owner_desk,
                              input=owner_token + "\n")
        assert configured.returncode == 0, configured.stderr
        assert "Olga Owner (owner, team Research)" in configured.stdout
        assert owner_token not in (owner_desk / "settings.json").read_text()
        assert json.loads((owner_desk / "settings.json").read_text())["server_url"] == server.url

        from app.core.desk import Desk

        with Desk(owner_desk) as desk:  # the owner's round 1 gets its target model
            task = desk.tasks.task("hate_speech")
            model = desk.models.register("test hate model", "hf-torch", "ab" * 32, task_id=task.id)
            _set_targets(desk, model)
        published = dynadesk("sync", "publish", "hate_speech", "--round", "1", data_dir=owner_desk)
        assert published.returncode == 0, published.stderr
        assert "3 stored" in published.stdout

        wrong = dynadesk("sync", "configure", "--url", server.url, "--token-stdin", data_dir=ann_desk,
                         input="ddk_wrong\n")
        assert wrong.returncode == 1 and "refused the sync token" in wrong.stderr
        configured = dynadesk("sync", "configure", "--url", server.url, "--token-stdin", "--interval", "120",
                              data_dir=ann_desk, input=ann_token + "\n")
        assert configured.returncode == 0 and "now works as Ann Annotator" in configured.stdout
        first = dynadesk("sync", "--now", data_dir=ann_desk)
        assert first.returncode == 0, first.stderr
        with Desk(ann_desk) as desk:
            person = desk.current_person()
            model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
            for i in range(3):
                desk.examples.create(person.id, "hate_speech", hate_content(f"from the command line {i}", "hate"),
                                     [hate_output(model, "not hate")], round_number=1)
        status = dynadesk("sync", data_dir=ann_desk)
        assert "Waiting:       3 record(s)" in status.stdout and "Every:         120 s" in status.stdout
        synced = dynadesk("sync", "--now", data_dir=ann_desk)
        assert synced.returncode == 0, synced.stderr
        assert "Pushed 3 new record(s)" in synced.stdout and "Waiting:       0 record(s)" in synced.stdout
        db = server_database(f"sqlite:///{database}")
        assert server_counts(db)["examples"] == 3
        db.close()

        lead_view = dynadesk("sync", "team", data_dir=ann_desk)
        assert lead_view.returncode == 1 and "Only leads and owners" in lead_view.stderr
        owner_view = dynadesk("sync", "team", "--by", "annotator", data_dir=owner_desk)
        assert "Ann Annotator" in owner_view.stdout and "100.0%" in owner_view.stdout
    finally:
        server.stop()

    offline = dynadesk("sync", "--now", data_dir=ann_desk)
    assert offline.returncode == 3 and "cannot be reached" in offline.stdout


def _set_targets(desk, model) -> None:
    from app.core.storage.models import RoundModel

    with desk.db.write() as session:
        session.add(RoundModel(round_id=desk.tasks.round("hate_speech", 1).id, model_id=model.id, position=0))


def test_sync_without_a_server_says_how_to_set_one(tmp_path):
    result = dynadesk("sync", "--now", data_dir=tmp_path / "desk")
    assert result.returncode == 1 and "dynadesk sync configure --url" in result.stderr
    result = dynadesk("sync", data_dir=tmp_path / "desk")
    assert "not set" in result.stdout and "Waiting:       0 record(s)" in result.stdout


sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


def _waiting_desk(data_dir, team):
    """Ann's desk with two examples in round 3 (the owner never published it) and one written
    against a model the server has never seen; synced once, so the server put all three off."""
    from tests.sync.helpers import prepare_desk
    from tests.sync.test_client import client_for

    desk = prepare_desk(data_dir, team.ann)
    model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
    desk.tasks.get_or_create_round("hate_speech", 3)
    for i in range(2):
        desk.examples.create(team.ann.id, "hate_speech", hate_content(f"in round three {i}", "hate"),
                             [hate_output(model, "not hate")], round_number=3)
    unknown = desk.models.register("my own model", "hf-torch", "cd" * 32, task_id=desk.tasks.task("hate_speech").id)
    desk.examples.create(team.ann.id, "hate_speech", hate_content("against my own model", "hate"),
                         [hate_output(unknown, "not hate")], round_number=2)
    desk.settings.server_url = team.url
    desk.save_settings()
    with client_for(desk, team.url, team.ann) as client:
        assert client.run(fetch_models=False).deferred == 3
    return desk


@sqlite_only
def test_sync_and_sync_problems_name_what_the_work_waits_for_and_what_fixes_it(team, data_dir):
    _waiting_desk(data_dir, team).close()
    runner = CliRunner()
    for args in (["sync"], ["sync", "problems"]):
        shown = runner.invoke(cli, args)
        assert shown.exit_code == 0, shown.output
        assert "3 wait for something the server does not have yet" in shown.output
        assert "2 because round 3 of 'hate_speech' is not published yet" in shown.output
        assert "the owner must publish round 3: `dynadesk sync publish hate_speech --round 3`" in shown.output
        assert "1 because model cdcdcdcdcdcd… is not published yet" in shown.output
        # "my own model" is no round's target: no publish sends it, and the desk does not pretend one does
        assert "no command fixes it: my own model is a model of this desk only" in shown.output


class BrokenStdout(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


@sqlite_only
def test_sync_configure_adopts_nothing_when_it_fails_half_way(team, data_dir):
    from app.core.desk import Desk
    from sync.tokens import TokenStore

    def nothing_adopted() -> None:
        assert TokenStore(data_dir).get(team.url) is None
        with Desk(data_dir) as desk:
            assert desk.settings.server_url is None and desk.settings.current_person_id != str(team.ann.id)
            assert not desk.db.get_meta("sync.person")

    with pytest.MonkeyPatch.context() as patch:  # a broken stdout (the terminal went away)
        patch.setattr(sys, "stdin", io.StringIO(team.ann.token + "\n"))
        patch.setattr(sys, "stdout", BrokenStdout())
        with pytest.raises(SystemExit):  # click ends a broken pipe with exit status 1
            cli.main(args=["sync", "configure", "--url", team.url, "--token-stdin"], standalone_mode=False)
    nothing_adopted()

    saved = Desk.save_settings

    def failing_save(self):
        if self.settings.server_url == team.url:
            raise OSError(28, "No space left on device")
        return saved(self)

    with pytest.MonkeyPatch.context() as patch:  # a step of the adoption fails: the token goes too
        patch.setattr(Desk, "save_settings", failing_save)
        failed = CliRunner().invoke(cli, ["sync", "configure", "--url", team.url, "--token-stdin"],
                                    input=team.ann.token + "\n")
        assert isinstance(failed.exception, OSError), failed.output
    nothing_adopted()

    configured = CliRunner().invoke(cli, ["sync", "configure", "--url", team.url, "--token-stdin"],
                                    input=team.ann.token + "\n")
    assert configured.exit_code == 0 and "now works as Ann Annotator" in configured.output
    assert TokenStore(data_dir).get(team.url) == team.ann.token


@sqlite_only
def test_the_owners_first_sync_publishes_the_open_rounds_the_server_lacks(server, server_db, tmp_path):
    from tests.sync.helpers import add_account, prepare_desk
    from tests.sync.test_client import client_for

    owner, ann = add_account(server_db, "Olga Owner", "owner"), add_account(server_db, "Ann Annotator", "annotator")
    desk = prepare_desk(tmp_path / "owner-desk", owner)  # a fresh team: nothing published yet
    model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
    _set_targets(desk, model)
    with client_for(desk, server.url, owner) as client:
        report = client.run(fetch_models=False)
        assert report.published == ["'hate_speech' round 1"], report.warnings
        assert "Published 'hate_speech' round 1" in report.summary()
        assert client.run(fetch_models=False).published == []  # once; later rounds are published on purpose
    desk.close()

    desk = prepare_desk(tmp_path / "ann-desk", ann)
    with client_for(desk, server.url, ann) as client:
        client.run(fetch_models=False)
        model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
        desk.examples.create(ann.id, "hate_speech", hate_content("no hidden step", "hate"),
                             [hate_output(model, "not hate")], round_number=1)
        report = client.run(fetch_models=False)
        assert (report.pushed, report.deferred) == (1, 0)
    desk.close()
    assert server_counts(server_db)["examples"] == 1
