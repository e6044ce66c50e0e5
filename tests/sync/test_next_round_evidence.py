"""The next round's evidence, end to end on real text and shared data only: HateCheck's dev cases become hate-speech
round 1, written against the default model and split by template; seeded simulated validators decide them;
round 2's candidate is trained from them plus (a seeded sample of) Davidson et al., compared, promoted and
published to a server on loopback; a second desk pulls it, checks every file's sha256 and switches its open
round to the new target. Every option is the desk's default: nothing is tuned on the held-out templates.

The full-size run (all of Davidson, the figures for the closing note) is `python -m bench.evidence_rounds`.
"""

from __future__ import annotations

import shutil
import uuid

import pytest

from app.core import paths
from app.core.desk import Desk
from app.core.domain import RoundStatus
from app.core.next_round.deferred_int8 import pending_int8
from app.core.services.target_models import adopt_default_model, load_engine_for
from app.core.storage.models import Example
from sync.client import SyncClient
from tests import round_flow as flow
from tests.conftest import shared_file
from tests.sync.helpers import add_account
from tests.sync.test_client import QUICK

DAVIDSON_ROWS = 1500  # a seeded sample keeps the test within its CI share; the bench runs all 24,783


def _desk(path, account) -> Desk:
    desk = Desk(path)
    desk.people.create(account.name, account.role, person_id=account.id)
    desk.switch_person(account.id)
    return desk


@pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)  # PostgreSQL: test_promotion_sync does both
# The int8 search is deferred (below); what is left still took over 600 s of wall time on a 2-core machine at
# load 10 (2.7 min of CPU: the import, 2,297 simulated validations, training), so the suite-wide 600 s is short.
@pytest.mark.timeout(1800)
def test_hatecheck_as_round_one_trains_a_round_two_target_that_reaches_another_desk(
        server, server_db, tmp_path, default_model_cache):
    hatecheck = shared_file(*flow.HATECHECK)
    base_csv = flow.davidson_sample(shared_file(*flow.DAVIDSON), tmp_path / "scratch" / "davidson.csv",
                                    DAVIDSON_ROWS)
    owner_account = add_account(server_db, "Olga Owner", "owner", "A")
    annotator_account = add_account(server_db, "Ann Annotator", "annotator", "A")

    owner = _desk(tmp_path / "owner", owner_account)
    shutil.copytree(default_model_cache, paths.models_cache_dir(owner.root), dirs_exist_ok=True)  # built once
    default = adopt_default_model(owner)
    assert default is not None
    report = flow.import_round_one(owner, hatecheck)
    assert report.added["examples"] == 2297, report.summary()
    validation = flow.simulate_validators(owner)
    assert 0 < validation["wrong_verdicts"] < 0.1 * validation["verdicts"]

    # one thread: CI runs two test workers on two cores, and oversubscribed threads slow training many times over;
    # the int8 search (minutes, 540 s measured on a 2-core AMD EPYC) is deferred, as `--int8 later` does: it has its
    # own tests (tests/local_models/test_int8_parity.py, tests/app/test_deferred_int8.py), and this one is the round
    manifest = flow.train_round_two(owner, base_csv, tmp_path / "candidate", num_threads=1, int8="later")
    splits = manifest["data"]["splits"]
    with owner.db.read() as session:
        template = {part: {session.get(Example, uuid.UUID(i)).origin["templ_id"] for i in splits[part]}
                    for part in ("train", "held_out")}
    assert template["held_out"] and not template["held_out"] & template["train"]  # no template on both sides
    assert manifest["parent"]["kind"] == "target"  # warm-started from round 1's target
    assert manifest["frozen_cache"]["used"] and manifest["frozen_cache"]["computed"] > 0

    comparison = flow.compare(owner, tmp_path / "candidate", base_csv, resamples=300, num_threads=1)
    figures = {(r["split"], r["metric"]): r for r in flow.figures(comparison)}
    held = figures[("held-out-1", "accuracy")]
    assert held["items"] == len(splits["held_out"])
    # trained on the other templates' cases, the candidate does better on the held-out templates' ones
    assert held["difference"] > 0, comparison.verdict.lines()
    assert figures[("held-out-1", "fooling_right")]["current"] == 0.0  # what fooled the target, by definition
    # ...but HateCheck's cases pull it away from Davidson's classes: its macro-F1 on the base test split falls
    # beyond its interval (72.8 % -> 48.3 %, -24.6 pt [-36.7, -9.7] on this machine), and the promotion rule
    # refuses it, naming that split, though the round's own held-out split improved
    base = figures[("base-test", "macro_f1")]
    assert base["high"] < 0, comparison.verdict.lines()
    assert comparison.worse and comparison.verdict.refused
    assert "davidson.csv, test split" in comparison.verdict.sentence, comparison.verdict.sentence
    promotion = flow.promote(owner, tmp_path / "candidate", comparison,
                             anyway="evidence run: the sync of a round-two target is under test here")
    assert promotion.round_number == 2 and promotion.forced
    # the round opens at once on the fp32 form; the int8 form waits for its search
    assert promotion.candidate.name.endswith("ONNX fp32") and "deferred" in promotion.parity_note
    assert [p.fp32_id for p in pending_int8(owner, flow.TASK)] == [promotion.candidate.id]
    with SyncClient(owner, server.url, owner_account.token, policy=QUICK) as client:
        results = client.publish(flow.TASK, [1, 2]).results
    assert {r.status for r in results} <= {"stored", "already_stored"}, results

    annotator = _desk(tmp_path / "annotator", annotator_account)
    with SyncClient(annotator, server.url, annotator_account.token, policy=QUICK) as client:
        pulled = client.run()
    assert not pulled.problems, pulled.problems
    rounds = {r.number: r for r in annotator.tasks.rounds(flow.TASK)}
    assert rounds[1].status == RoundStatus.CLOSED and rounds[2].status == RoundStatus.OPEN
    assert annotator.tasks.round(flow.TASK).number == 2  # the open round writers now work in
    targets = annotator.models.round_models(rounds[2].id)
    assert [t.sha256 for t in targets] == [promotion.candidate.sha256]
    engine = load_engine_for(targets[0], num_threads=1)  # files whole, each checked against its sha256
    try:
        assert {p.label for p in engine.predict(["I hate all women.", "I love my gay friends."])} <= set(flow.LABELS)
    finally:
        engine.close()
    annotator.close()
    owner.close()
