"""A promoted round reaches the team: the owner promotes a trained candidate on their desk and publishes
the new round; an annotator's desk pulls it, checks and stores the candidate's files, and writes in the
new round against it, while the round before is closed on both desks."""

from __future__ import annotations

import shutil

from app.core.domain import RoundStatus
from app.core.next_round.promotion import promote_candidate
from app.core.services.target_models import load_engine_for
from sync.client import SyncClient
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import QUICK

TASK = "hate_speech"


def test_a_promoted_round_is_published_and_another_desk_switches_to_its_target(team, tmp_path,
                                                                                  hate_trigger_model_dir):
    candidate_dir = tmp_path / "candidate"
    shutil.copytree(hate_trigger_model_dir.parent.parent / "parts" / "hate-trigger", candidate_dir)

    owner = prepare_desk(tmp_path / "owner", team.owner)
    with SyncClient(owner, team.url, team.owner.token, policy=QUICK) as client:
        client.run(fetch_models=False)
    before = max(r.number for r in owner.tasks.rounds(TASK))
    promotion = promote_candidate(owner, TASK, candidate_dir, force=True,
                                  reason="no comparison here: this test is about publishing the round")
    assert promotion.round_number == before + 1
    with SyncClient(owner, team.url, team.owner.token, policy=QUICK) as client:
        results = client.publish(TASK, [before, promotion.round_number]).results
    assert {r.status for r in results} <= {"stored", "already_stored"}, results

    annotator = prepare_desk(tmp_path / "ann", team.ann)
    with SyncClient(annotator, team.url, team.ann.token, policy=QUICK) as client:
        report = client.run()
    assert not report.problems, report.problems
    rounds = {r.number: r for r in annotator.tasks.rounds(TASK)}
    assert rounds[before].status == RoundStatus.CLOSED and rounds[promotion.round_number].status == RoundStatus.OPEN
    targets = annotator.models.round_models(rounds[promotion.round_number].id)
    assert [t.sha256 for t in targets] == [promotion.candidate.sha256]
    engine = load_engine_for(targets[0], num_threads=1)  # as the desk loads a target: files whole, checksum checked
    assert [p.label for p in engine.predict(["a banana for you", "a quiet afternoon"])] == ["hate", "not hate"]
    engine.close()
    annotator.close()
    owner.close()
