"""The review dashboard's figures on a small team, computed by hand; filters; incremental refresh."""

from __future__ import annotations

import csv
from datetime import UTC

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from app.core.services.dashboard import DashboardService
from app.core.services.dashboard_snapshot import DashboardFilter
from tests.conftest import hate_content, hate_output
from tests.simulation import small_team


@pytest.fixture
def team(desk, people, target_model):
    return small_team(desk, people, target_model)


def by_name(rows):
    return {row.name: row for row in rows}


def test_per_annotator_metrics_by_hand(desk, people, team):
    desk.dashboard.refresh()
    rows = by_name(desk.dashboard.annotators(team.flt))
    assert set(rows) == {"Ana Author", "Vic Validator", "Wen Validator", "Xia Validator"}  # the lead gave no peer verdicts
    ana = rows["Ana Author"]
    assert (ana.submitted, ana.retracted, ana.fooled, ana.validated_fooling, ana.decided, ana.rejected) == (5, 1, 3, 1, 2, 1)
    assert ana.mer == pytest.approx(3 / 5) and ana.vmer == pytest.approx(1 / 5)
    assert ana.rejection_rate == pytest.approx(1 / 2)
    assert ana.retraction_rate == pytest.approx(1 / 6)
    # writing time recorded: 60 + 120 + 0 + 30 + 50 + 90 (retracted) s; five submitted
    assert ana.writing_hours == pytest.approx(350 / 3600)
    assert ana.examples_per_hour == pytest.approx(5 / (350 / 3600))
    assert ana.median_seconds == pytest.approx(55)  # of 30, 50, 60, 120 (a3 has no recorded time)
    assert ana.perturbations == 2 and ana.mean_edit_distance == pytest.approx((1 + 3) / 2)
    assert ana.validations == 0 and ana.agreement_with_decision is None

    vic = rows["Vic Validator"]
    assert (vic.submitted, vic.fooled, vic.validated_fooling, vic.decided, vic.rejected) == (1, 1, 1, 1, 0)
    assert vic.mer == 1 and vic.vmer == 1 and vic.rejection_rate == 0 and vic.retraction_rate == 0
    assert vic.examples_per_hour == pytest.approx(1 / (40 / 3600)) and vic.median_seconds == 40
    assert vic.perturbations == 0 and vic.mean_edit_distance is None
    # Vic's verdicts: a1 correct (decided correct), a2 incorrect → not hate (decided so), a3 undecided
    assert (vic.validations, vic.validations_on_decided, vic.agreement_with_decision) == (3, 2, 1.0)
    xia = rows["Xia Validator"]  # a1 incorrect (overruled by the lead), a2 agreed, a3 undecided
    assert (xia.validations, xia.validations_on_decided, xia.agreement_with_decision) == (3, 2, 0.5)
    assert xia.submitted == 0 and xia.mer is None and xia.examples_per_hour is None
    assert rows["Wen Validator"].agreement_with_decision == 1.0


def test_figures_agree_with_the_sql_statistics_service(desk, team):
    desk.dashboard.refresh()
    dashboard = by_name(desk.dashboard.annotators(team.flt))
    for figures in desk.stats.figures("annotator"):
        row = dashboard[figures.name]
        assert (row.submitted, row.fooled, row.validated_fooling) == (
            figures.submitted, figures.fooled, figures.validated_fooling)
    rounds = by_name(desk.dashboard.breakdown("round", team.flt))
    for figures in desk.stats.figures("round"):
        assert rounds[f"Round {figures.name.rsplit(' ', 1)[1]}"].mer == pytest.approx(figures.mer)
    models = by_name(desk.dashboard.breakdown("model", team.flt))
    for figures in desk.stats.figures("model"):
        assert (models[figures.name].submitted, models[figures.name].fooled,
                models[figures.name].validated_fooling) == (figures.submitted, figures.fooled, figures.validated_fooling)


def test_breakdowns_per_round_label_model_hate_type_and_target_group(desk, team):
    desk.dashboard.refresh()
    rounds = desk.dashboard.breakdown("round", team.flt)
    assert [(r.name, r.submitted, r.retracted, r.fooled, r.decided, r.undecided) for r in rounds] == [
        ("Round 1", 5, 1, 3, 2, 3), ("Round 2", 1, 0, 1, 1, 0)]
    labels = by_name(desk.dashboard.breakdown("label", team.flt))
    assert (labels["hate"].submitted, labels["hate"].retracted, labels["hate"].fooled) == (2, 1, 2)
    assert (labels["not hate"].submitted, labels["not hate"].fooled, labels["not hate"].mer) == (4, 2, 0.5)
    [model] = desk.dashboard.breakdown("model", team.flt)
    assert (model.name, model.submitted, model.fooled, model.validated_fooling) == ("test hate model", 6, 4, 2)
    types = by_name(desk.dashboard.breakdown("hate_type", team.flt))
    assert (types["derogation"].submitted, types["derogation"].retracted) == (1, 1)  # a1; a6 retracted
    assert (types["dehumanization"].submitted, types["dehumanization"].rejection_rate) == (1, 1.0)
    groups = by_name(desk.dashboard.breakdown("target_groups", team.flt))
    assert (groups["women"].submitted, groups["women"].retracted, groups["women"].vmer) == (2, 1, 0.5)  # a1, a2; a6
    assert (groups["immigrants"].submitted, groups["immigrants"].mer) == (1, 1.0)
    assert desk.dashboard.breakdown("no such field", team.flt) == []


def test_filters_narrow_every_figure(desk, people, team):
    service = desk.dashboard
    service.refresh()
    round2 = DashboardFilter(task_id=team.task_id, round_ids=[team.round2.id])
    assert [r.name for r in service.annotators(round2)] == ["Vic Validator"]
    immigrants = DashboardFilter(task_id=team.task_id, facets={"target_groups": ["immigrants"]})
    [ana] = [r for r in service.annotators(immigrants) if r.submitted]
    assert (ana.name, ana.submitted, ana.vmer) == ("Ana Author", 1, 1.0)
    not_hate = DashboardFilter(task_id=team.task_id, labels=["not hate"])
    assert {r.name: r.submitted for r in service.annotators(not_hate) if r.submitted} == {"Ana Author": 3, "Vic Validator": 1}
    # Choosing a person shows their row only, with their verdicts on anyone's examples.
    xia = DashboardFilter(task_id=team.task_id, author_ids=[people.val3.id])
    [row] = service.annotators(xia)
    assert (row.name, row.validations, row.agreement_with_decision) == ("Xia Validator", 3, 0.5)
    nli = DashboardFilter(task_id=desk.tasks.task("nli").id)
    assert service.annotators(nli) == [] and service.view(nli).matching == 0
    later = DashboardFilter(task_id=team.task_id, since=team.v1.submitted_at)
    assert [r.name for r in service.annotators(later) if r.submitted] == ["Vic Validator"]
    earlier = DashboardFilter(task_id=team.task_id, until=team.v1.submitted_at)
    assert [r.name for r in service.annotators(earlier) if r.submitted] == ["Ana Author"]


def test_agreement_of_peer_validators(desk, people, team):
    desk.dashboard.refresh()
    result, names = desk.dashboard.agreement(team.flt, min_overlap=2)
    pairs = {(names[p.rater_a], names[p.rater_b]): p for p in result.pairs}
    pairs.update({(b, a): p for (a, b), p in list(pairs.items())})
    # Vic and Xia share a1 (correct / incorrect), a2 (incorrect / incorrect), a3 (correct / flagged):
    # observed 1/3, expected 1/3·2/3 = 2/9, κ = (1/3 − 2/9) / (7/9) = 1/7
    vic_xia = pairs[("Vic Validator", "Xia Validator")]
    assert (vic_xia.items, vic_xia.observed, vic_xia.kappa) == (3, pytest.approx(1 / 3), pytest.approx(1 / 7))
    assert vic_xia.kappa == pytest.approx(cohen_kappa_score(["c", "i", "c"], ["i", "i", "f"]))
    assert pairs[("Vic Validator", "Wen Validator")].kappa == pytest.approx(1.0)
    assert result.fleiss_items == 3 and result.alpha_items == 3 and result.ratings == 8
    assert desk.dashboard.agreement(team.flt)[0].pairs == []  # fewer than ten shared examples


def test_chart_series(desk, people, team):
    service = desk.dashboard
    service.refresh()
    view = service.view(team.flt)
    assert {s.name: (s.mer[-1], s.vmer[-1]) for s in view.time_series} == {
        "Ana Author": (pytest.approx(3 / 5), pytest.approx(1 / 5)), "Vic Validator": (1.0, 1.0)}
    assert all(len(s.mer) == len(view.time_edges) for s in view.time_series)
    assert {b.name: b.value for b in view.labels} == {"not hate": 4, "hate": 2}
    assert {b.name: b.value for b in view.facets["target_groups"]} == {"women": 2, "immigrants": 1}
    assert {b.name: b.value for b in view.facets["hate_type"]} == {"derogation": 1, "dehumanization": 1}
    assert view.facet_titles == {"hate_type": "Type of hate", "target_groups": "Target groups"}
    assert [(b.name, b.value, b.second) for b in view.fooling_by_round] == [
        ("Round 1", pytest.approx(3 / 5), pytest.approx(1 / 5)), ("Round 2", 1.0, 1.0)]
    assert view.backlog[-1] == 3  # a3, a4 and a5 wait for a decision
    assert max(view.backlog) <= 6 and min(view.backlog) >= 0
    chosen = service.view(team.flt, chart_people=[people.val1.id])
    assert [s.name for s in chosen.time_series] == ["Vic Validator"]


def test_refresh_is_incremental_and_matches_a_rebuild(desk, people, team, target_model):
    service = desk.dashboard
    assert service.refresh() > 0
    version = service.version
    assert service.refresh() == 0 and service.version == version  # nothing changed
    desk.validation.validate(team.a4.id, people.val2.id, "correct")
    desk.examples.retract(team.a5.id, people.author.id, "second thoughts")  # an update, not an insert
    extra = desk.examples.create(people.val2.id, "hate_speech", hate_content("a new one", "hate"),
                                 [hate_output(target_model, "not hate")], time_spent_ms=10_000)
    assert service.refresh() == 4  # a4 (its summary), a5 (retracted), the new example, the verdict
    assert service.version == version + 1
    rows = by_name(service.annotators(team.flt))
    assert (rows["Ana Author"].submitted, rows["Ana Author"].retracted) == (4, 2)
    assert (rows["Wen Validator"].validations, rows["Wen Validator"].submitted) == (3, 1)
    fresh = DashboardService(desk.db, desk.tasks)
    fresh.refresh()
    assert fresh.annotators(team.flt) == service.annotators(team.flt)
    assert fresh.breakdown("target_groups", team.flt) == service.breakdown("target_groups", team.flt)
    assert extra.id.hex in service.examples.row_of  # the new example is in the snapshot


def test_a_draft_submitted_after_newer_examples_is_counted_by_the_quick_refresh(desk, people, team, target_model):
    """A resumed draft keeps the rowid it got when it was started, below examples created since."""
    service = desk.dashboard
    draft = desk.examples.start_draft(people.author.id, "hate_speech", content=hate_content("an old draft", "hate"))
    desk.examples.create(people.author.id, "hate_speech", hate_content("written after the draft", "hate"),
                         [hate_output(target_model, "not hate")])
    service.refresh()
    before = by_name(service.annotators(team.flt))["Ana Author"].submitted
    desk.examples.submit(draft.id, [hate_output(target_model, "not hate")])
    assert service.refresh() == 1
    assert by_name(service.annotators(team.flt))["Ana Author"].submitted == before + 1


def test_a_thorough_refresh_finds_rows_changed_elsewhere(desk, people, team):
    """A synced edit changes a row without a new verdict or a status change: only the scan of
    updated_at finds it."""
    from sqlalchemy import text

    service = desk.dashboard
    service.refresh()
    with desk.db.write() as session:
        session.execute(text("UPDATE examples SET true_label = 'hate', updated_at = :now WHERE id = :id"),
                        {"now": "2999-01-01 00:00:00.000000", "id": team.a3.id.hex})
    assert service.refresh() == 0
    assert by_name(service.breakdown("label", team.flt))["hate"].submitted == 2
    assert service.refresh(thorough=True) == 1
    assert by_name(service.breakdown("label", team.flt))["hate"].submitted == 3
    assert service.refresh(thorough=True) == 0  # seen once, not again


def test_deleted_rows_trigger_a_rebuild(desk, people, team):
    service = desk.dashboard
    service.refresh()
    with desk.db.write() as session:
        session.execute(__import__("sqlalchemy").text("DELETE FROM validations WHERE validator_id = :v"),
                        {"v": people.val3.id.hex})
    service.refresh()
    assert "Xia Validator" not in by_name(service.annotators(team.flt))


def test_csv_export_of_the_table_and_breakdowns(desk, team, tmp_path):
    from app.core.errors import DynadeskError
    from app.core.services.dashboard_tables import export_csv

    desk.dashboard.refresh()
    view = desk.dashboard.view(team.flt, breakdown="target_groups")
    path = export_csv(view.annotators, tmp_path / "annotators.csv", per_person=True)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    ana = next(r for r in rows if r["Annotator"] == "Ana Author")
    assert ana["Submitted"] == "5" and float(ana["MER"]) == pytest.approx(0.6)
    assert float(ana["Per hour"]) == pytest.approx(5 / (350 / 3600)) and ana["Retracted examples"] == "1"
    assert next(r for r in rows if r["Annotator"] == "Xia Validator")["MER"] == ""  # undefined, not zero
    path = export_csv(view.breakdowns["target_groups"], tmp_path / "groups.csv", per_person=False)
    groups = {r["Group"]: r for r in csv.DictReader(path.open(encoding="utf-8"))}
    assert groups["women"]["Submitted"] == "2" and groups["immigrants"]["MER"] == "1.0"
    with pytest.raises(DynadeskError, match="Could not write"):
        export_csv(view.annotators, tmp_path / "no such folder" / "x.csv", per_person=True)


def test_group_median_matches_numpy():
    from app.core.services.dashboard_tables import _group_median

    rng = np.random.default_rng(4)
    codes, values = rng.integers(0, 6, 500), rng.random(500)
    values = (values * 100_000).astype(np.int64)
    medians = _group_median(codes, values, 8)
    for group in range(6):
        assert medians[group] == pytest.approx(np.median(values[codes == group]))
    assert np.isnan(medians[6:]).all()


@pytest.mark.slow
def test_anli_with_simulated_validators(desk):
    """Real ANLI text shared among six writers; five validators of differing care, seeded."""
    import krippendorff
    from sqlalchemy import text

    from tests.conftest import shared_file
    from tests.simulation import import_anli_team, simulate_validators

    team = simulate_validators(desk, import_anli_team(desk, shared_file("anli", "ANLI_analysis_r1_dev.csv")),
                               share=0.5)
    service = desk.dashboard
    service.refresh()
    task_id = desk.tasks.task("nli").id
    view = service.view(DashboardFilter(task_id=task_id), breakdown="label")
    rows = by_name(view.annotators)
    assert set(rows) == set(team.writers) | set(team.validators)
    assert view.total_examples == 1000 and sum(rows[w].submitted + rows[w].retracted for w in team.writers) == 1000
    # The same counts as the SQL statistics service, per writer.
    for figures in desk.stats.figures("annotator", task_id=task_id):
        row = rows[figures.name]
        assert (row.submitted, row.fooled, row.validated_fooling) == (figures.submitted, figures.fooled,
                                                                      figures.validated_fooling)
    with desk.db.read() as session:
        decided = dict(session.execute(text(
            "SELECT p.display_name, avg(e.decided_verdict = 'incorrect') FROM examples e JOIN people p "
            "ON p.id = e.author_id WHERE e.status = 'submitted' AND e.decided_verdict IS NOT NULL "
            "GROUP BY p.display_name")).all())
        verdicts = session.execute(text(
            "SELECT v.example_id, v.validator_id, v.verdict || coalesce('→' || v.corrected_label, '') "
            "FROM validations v WHERE v.mode = 'peer'")).all()
    for name, rate in decided.items():
        assert rows[name].rejection_rate == pytest.approx(rate)
    # Careful validators agree with the final decision more often than careless ones.
    assert rows["Gita Rao"].agreement_with_decision > rows["Jonas Berg"].agreement_with_decision
    assert rows["Hugo Martin"].agreement_with_decision > rows["Kofi Mensah"].agreement_with_decision
    assert all(rows[v].validations > 100 for v in team.validators)
    # Agreement: the same verdicts, as an items × validators matrix, through the reference package.
    items = sorted({v[0] for v in verdicts})
    people = sorted({v[1] for v in verdicts})
    categories = sorted({v[2] for v in verdicts})
    matrix = np.full((len(people), len(items)), np.nan)
    for example, validator, key in verdicts:
        matrix[people.index(validator), items.index(example)] = categories.index(key)
    assert view.agreement.ratings == len(verdicts)
    assert view.agreement.krippendorff_alpha == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))
    names = view.rater_names
    for pair in view.agreement.pairs:
        a = people.index(team.validators[names[pair.rater_a]].hex)
        b = people.index(team.validators[names[pair.rater_b]].hex)
        both = ~np.isnan(matrix[a]) & ~np.isnan(matrix[b])
        assert pair.items == both.sum() >= 10
        assert pair.kappa == pytest.approx(cohen_kappa_score(matrix[a, both], matrix[b, both]))
    assert len(view.agreement.pairs) >= 6
    assert 0 < view.agreement.fleiss_kappa < 1 and 0 < view.agreement.krippendorff_alpha < 1
    labels = by_name(view.breakdowns["label"])
    assert set(labels) == {"entailment", "neutral", "contradiction"}
    assert view.backlog[-1] == sum(r.undecided for r in labels.values())  # undecided now, all labels


@pytest.mark.slow
def test_time_series_against_a_brute_force_count(desk):
    """Backlog and cumulative MER/vMER at each bin end, recounted from SQL rows one by one."""
    from datetime import datetime

    from sqlalchemy import text

    from tests.conftest import shared_file
    from tests.simulation import import_anli_team, simulate_validators

    team = simulate_validators(desk, import_anli_team(desk, shared_file("anli", "ANLI_analysis_r1_dev.csv"), days=10),
                               share=0.3)
    service = desk.dashboard
    service.refresh()
    now = datetime.now(UTC)
    view = service.view(DashboardFilter(task_id=desk.tasks.task("nli").id), now=now)

    def stamp(value) -> float:
        return datetime.fromisoformat(str(value)).replace(tzinfo=UTC).timestamp()

    with desk.db.read() as session:
        examples = session.execute(text(
            "SELECT e.id, e.author_id, e.submitted_at, e.model_fooled, e.decided_verdict, "
            "(SELECT max(v.created_at) FROM validations v WHERE v.example_id = e.id) "
            "FROM examples e WHERE e.status = 'submitted'")).all()
    submitted = [stamp(e[2]) for e in examples]
    decided = [stamp(e[5]) for e in examples if e[4] is not None]
    for edge, backlog in zip(view.backlog_times, view.backlog):
        assert backlog == sum(t < edge for t in submitted) - sum(t < edge for t in decided)
    assert view.backlog[-1] == len(submitted) - len(decided)
    [amara] = [s for s in view.time_series if s.name == "Amara Okafor"]
    mine = [e for e in examples if e[1] == team.writers["Amara Okafor"].hex]
    for edge, mer, vmer in zip(view.time_edges, amara.mer, amara.vmer):
        so_far = [e for e in mine if stamp(e[2]) < edge + 1e-6]
        if not so_far:
            assert np.isnan(mer)
            continue
        assert mer == pytest.approx(sum(bool(e[3]) for e in so_far) / len(so_far))
        assert vmer == pytest.approx(sum(bool(e[3]) and e[4] == "correct" for e in so_far) / len(so_far))
