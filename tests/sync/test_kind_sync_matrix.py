"""Every kind of data through the sync doors (DESIGN.md §4.12): an owner's desk holds every kind of
tests/app/test_kind_door_matrix.py (written, perturbation pair, returned then revised, retracted,
HateCheck and DynaHate and ANLI imports, NLI, extractive QA), publishes, shares its imports and
pushes; an annotator's example reaches it by a pull; a lead's desk pulls everything. Each kind then
counts the same on the lead's desk as the hand count says, and nothing waits.

One server and one team for the module, as a new team would set them up from the docs (the CLI)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.core.desk import Desk
from app.core.services.lead import REVISION
from tests.app.test_kind_door_matrix import HATE, Kind, build_kinds
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import MODEL_SHA, ThreadServer, add_account, publish_basics, server_database


def run(data_dir, *args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(cli, ["--data-dir", str(data_dir), *args], input=input)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def configure(data_dir, url: str, token: str) -> None:
    run(data_dir, "sync", "configure", "--url", url, "--token-stdin", input=token + "\n")


def examples_in(desk: Desk, task: str, number: int) -> list:
    from sqlalchemy import select

    from app.core.storage.models import Example

    with desk.db.read() as session:
        return list(session.scalars(select(Example).where(Example.round_id == desk.tasks.round(task, number).id)))


def team_desk(path, account) -> Desk:
    desk = Desk(path)
    desk.people.create(account.name, account.role, person_id=account.id)
    desk.switch_person(account.id)
    return desk


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """(the owner's kinds, the owner's folder, the lead's folder) once everyone has synced."""
    tmp = tmp_path_factory.mktemp("sync-matrix")
    db = server_database(f"sqlite:///{tmp / 'server.sqlite'}")
    server = ThreadServer(db, tmp / "server")
    try:
        owner = add_account(db, "Olga Owner", "owner", "A")
        lead = add_account(db, "Lee Lead", "lead", "A")
        ann = add_account(db, "Ann Annotator", "annotator", "A")
        publish_basics(server.url, owner, tmp)
        owner_dir, ann_dir, lead_dir = tmp / "owner", tmp / "ann", tmp / "lead"
        desk, kinds, _validator = build_kinds(tmp, team_desk(owner_dir, owner), pulled=False, targets=True)
        desk.close()
        configure(owner_dir, server.url, owner.token)
        for task in (HATE, "nli", "extractive_qa"):  # the docs' order: publish, share the imports, sync
            run(owner_dir, "sync", "publish", task)
        run(owner_dir, "sync", "share-imported")
        run(owner_dir, "sync", "--now")
        # Ann's desk pulls the published rounds, she writes in round 14, and the owner's desk pulls it
        team_desk(ann_dir, ann).close()
        configure(ann_dir, server.url, ann.token)
        run(ann_dir, "sync", "--now")
        with Desk(ann_dir) as desk:
            model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
            desk.examples.create(ann.id, HATE, hate_content("written on another desk", "hate"),
                                 [hate_output(model, "not hate")], round_number=14)
        run(ann_dir, "sync", "--now")
        run(owner_dir, "sync", "--now")
        kinds["pulled"] = Kind("pulled", HATE, 14, written=1, fooled=1)
        # the lead returns the owner's round-12 example from her desk; the owner revises it on his
        team_desk(lead_dir, lead).close()
        configure(lead_dir, server.url, lead.token)
        run(lead_dir, "sync", "--now")
        with Desk(lead_dir) as desk:
            [returned] = [e for e in examples_in(desk, HATE, 12)]
            desk.lead.return_examples(lead.id, [returned.id], "say who is meant")
        run(lead_dir, "sync", "--now")
        run(owner_dir, "sync", "--now")
        with Desk(owner_dir) as desk:
            [returned] = [e for e in examples_in(desk, HATE, 12)]
            assert desk.lead.history(returned.id), "the lead's return reached the owner's desk"
            model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
            desk.examples.create(owner.id, HATE, hate_content("returned by the lead, revised", "hate"),
                                 [hate_output(model, "not hate")], round_number=12,
                                 origin={"kind": REVISION, "of": str(returned.id)})
        run(owner_dir, "sync", "--now")
        run(lead_dir, "sync", "--now")
        kinds["returned then revised"] = Kind("returned then revised", HATE, 12, written=2, fooled=2)
        yield kinds, owner_dir, lead_dir
    finally:
        server.stop()
        db.close()


def test_nothing_waits_after_publish_share_and_push(synced):
    _kinds, owner_dir, _lead_dir = synced
    shown = run(owner_dir, "sync")
    assert "Waiting:       0 record(s)" in shown and "because" not in shown, shown


@pytest.mark.parametrize("name", ["written", "perturbation pair", "returned then revised", "retracted", "pulled",
                                  "hatecheck round", "dynahate", "nli", "anli", "qa"])
def test_every_kind_counts_the_same_on_each_desk(synced, name):
    """The owner's desk (which wrote, imported or pulled the kind) and the lead's (which pulled it all) count
    the kind's round as the hand count says."""
    kinds, owner_dir, lead_dir = synced
    kind = kinds[name]
    for where in (owner_dir, lead_dir):
        with Desk(where) as desk:
            round_ = desk.tasks.round(kind.task, kind.round)
            rows = [f for f in desk.stats.figures("round", task_id=desk.tasks.task(kind.task).id)
                    if f.key == str(round_.id)]
            counted = [(f.submitted, f.imported, f.fooled) for f in rows]
            assert counted == ([(kind.written, kind.imported, kind.fooled)] if kind.written + kind.imported else []), \
                where.name
            # every example of the kind arrived as what it is: retracted ones retracted, a pair still linked,
            # a revision still naming the example it revises
            examples = [e for e in examples_in(desk, kind.task, kind.round) if e.status != "draft"]
            assert len(examples) == kind.non_draft, where.name
            assert sum(e.status == "retracted" for e in examples) == kind.retracted, where.name
            ids = {e.id for e in examples}
            if name == "perturbation pair":
                assert [e.perturbation_of in ids for e in examples].count(True) == 1, where.name
            if name == "returned then revised":
                assert [str((e.origin or {}).get("of")) in {str(i) for i in ids} for e in examples].count(True) == 1
