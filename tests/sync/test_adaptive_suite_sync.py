"""The adaptive suite across a team: a lead's desk grows variants of a seed against its new round's target (the tiny
model, published for the team) and pushes them, another lead's desk pulls and validates them, and once synced back the variants are in the first desk's suite; the server's team
figures never credit the lead who generated them. Real desks (SQLite files), a real server on loopback (SQLite,
and PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import httpx

from app.core.adaptive_suite.variants import VARIANT_SOURCE
from app.core.io.records import dump_model, dump_round
from app.core.services.target_models import load_ensemble, register_model
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import MODEL_SHA, add_account, prepare_desk
from tests.sync.test_client import client_for

HATE = "hate_speech"


def test_variants_grown_on_one_desk_are_vetted_on_another_and_join_the_first_desks_suite(team, tmp_path, server_db,
                                                                                         tiny_classifier_dir):
    vera = add_account(server_db, "Vera Vetter", "lead", "A")
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    vetter = prepare_desk(tmp_path / "vera", vera)
    clients = [client_for(d, team.url, a) for d, a in ((ann, team.ann), (lead, team.lead), (vetter, vera))]
    ann_client, lead_client, vetter_client = clients
    try:
        for client in clients:
            client.run()
        model = next(m for m in ann.models.all() if m.sha256 == MODEL_SHA)
        seed = ann.examples.create(team.ann.id, HATE, hate_content("Women are worthless.", "hate"),
                                   [hate_output(model, "not hate")], round_number=1)
        ann_client.run()
        lead_client.run()
        lead.validation.validate(seed.id, team.lead.id, "correct", mode="lead")
        (topic,) = lead.adaptive_suite.topics(HATE)
        assert topic.seed_id == seed.id

        # the lead makes the tiny model the target of a new round 3 (published for the team) and grows
        target = register_model(lead, tiny_classifier_dir, name="tiny", task_code=HATE)
        round_3 = lead.tasks.get_or_create_round(HATE, 3)
        lead.rounds.set_models(round_3.id, team.lead.id, [target.id])
        published = httpx.post(f"{team.url}/v1/publish", headers={"Authorization": f"Bearer {team.owner.token}"},
                               json={"records": [dump_model(target, HATE), dump_round(round_3, HATE, [target.id])]})
        assert published.status_code == 200, published.text
        models = load_ensemble([target])
        try:
            report = lead.adaptive_suite.grow(HATE, models, per_seed=2, generated_by=team.lead.id)
        finally:
            models.close()
        made = list(report.added_ids)
        assert len(made) == 2 and report.round_number == 3 and lead.adaptive_suite.cases(HATE) == []
        pushed = lead_client.run()  # pushed as examples, with the seed's verdict
        assert (pushed.rejected, pushed.pushed) == (0, 3), pushed.summary()  # two variants and the verdict

        vetter_client.run()
        pulled = {s.example_id: s for s in vetter.adaptive_suite.variants_of(seed.id)}
        assert set(pulled) == set(made)  # the variant and its seed travel as examples do
        assert {vetter.examples.get(i).source for i in made} == {VARIANT_SOURCE}
        queued = {e.id for e in vetter.validation.queue(vera.id, task_code=HATE, limit=100)}
        assert set(made) <= queued
        vetter.validation.validate(made[0], vera.id, "correct", mode="lead")
        vetter.validation.validate(made[1], vera.id, "incorrect", corrected_label="not hate",
                                   reason="reads as a report", mode="lead")
        vetter_client.run()

        lead_client.run()
        cases = {c.example_id: c for c in lead.adaptive_suite.cases(HATE)}
        assert set(cases) == set(made)
        assert (cases[made[0]].label, cases[made[1]].label) == ("hate", "not hate")
        assert all(c.seed_id == seed.id and c.round_number == 3 for c in cases.values())
        (state,) = [s for s in lead.adaptive_suite.variants_of(seed.id) if s.example_id == made[0]]
        assert state.validators == ("Vera Vetter",) and "validated by Vera Vetter" in state.provenance()
        assert lead.adaptive_suite.topics(HATE)[0].validated == 2

        # the server's team figures: Ann's writing, never the lead's generated variants
        response = httpx.get(f"{team.url}/v1/team/stats", params={"by": "annotator"},
                             headers={"Authorization": f"Bearer {team.lead.token}"})
        assert response.status_code == 200, response.text
        rows = {r["key"]: r for r in response.json()["rows"]}
        assert str(team.lead.id) not in rows
        assert (rows[str(team.ann.id)]["submitted"], rows[str(team.ann.id)]["fooled"]) == (1, 1)
        by_round = httpx.get(f"{team.url}/v1/team/stats", params={"by": "round"},
                             headers={"Authorization": f"Bearer {team.lead.token}"}).json()["rows"]
        assert sum(r["submitted"] for r in by_round) == 1 and sum(r["fooled"] for r in by_round) == 1
    finally:
        for client in clients:
            client.close()
        for desk in (ann, lead, vetter):
            desk.close()
