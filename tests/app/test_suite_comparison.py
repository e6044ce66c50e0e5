"""The adaptive suite in every comparison: `rounds compare` scores it as one more split (per topic family too), on
the variants of held-out seeds only when the candidate trained on variants; the promotion rule refuses a candidate
significantly worse on it, and says when it is too small to judge."""

from __future__ import annotations

import json
import shutil

import pytest

from app.cli.compare import REFUSED_EXIT
from app.core.next_round.comparison import compare_candidate
from app.core.next_round.comparison_report import write_report
from app.core.next_round.promotion_rule import TOO_FEW, judge
from app.core.next_round.round_training import MANIFEST_FILE, MANIFEST_FORMAT
from app.core.next_round.suite_split import ADAPTIVE_KEY
from tests.model_fixtures import FILLER, TRIGGER
from tests.suite_flow import HATE, add_variants, seeds_on_both_sides


def trigger_says(text: str) -> str:
    return "hate" if TRIGGER in text.split() else "not hate"


@pytest.fixture
def suite_desk(desk, people, hate_trigger_model_dir, tiny_classifier_dir, tmp_path):
    """Round 1's target calls hate what carries the trigger word; round 2 is open with the same target, and the
    candidate is a tiny random classifier."""
    from app.core.services.target_models import register_model

    current_dir = tmp_path / "current"
    shutil.copytree(hate_trigger_model_dir, current_dir)
    current = register_model(desk, current_dir, name="banana detector", task_code=HATE)
    desk.rounds.set_models(desk.tasks.round(HATE, 1).id, people.lead.id, [current.id])
    candidate = tmp_path / "candidate"
    shutil.copytree(tiny_classifier_dir, candidate)
    return {"current": current, "candidate": candidate, "vetter": desk.people.create("Vera Vetter", "lead")}


def grow(desk, people, suite_desk, *, training: int, held_out: int, per_seed: int) -> dict:
    """Seeds in round 1 (on both sides of the held-out split), then round 2 opened and each seed given
    ``per_seed`` validated variants in two families, labelled as the current target reads them (it gets them all
    right)."""
    current = suite_desk["current"]
    train_seeds, held_seeds = seeds_on_both_sides(desk, people.author, people.lead, current, training=training,
                                                  held_out=held_out)
    desk.rounds.open_next(HATE, people.lead.id, [current.id])
    variants: dict[str, list[str]] = {}
    for n, seed in enumerate(train_seeds + held_seeds):
        texts = []
        for j in range(per_seed):
            words = [FILLER[(n + j + k) % len(FILLER)] for k in range(5)] + [f"s{n}v{j}"]
            if j % 2 == 0:
                words.insert(2, TRIGGER)
            texts.append(" ".join(words))
        ids = []
        for family, chosen in (("derogation", texts[::2]), ("threatening language", texts[1::2])):
            ids += add_variants(desk, people.lead, suite_desk["vetter"], current, seed,
                                [(t, trigger_says(t)) for t in chosen], family=family, model_label=trigger_says)
        variants[str(seed.id)] = [str(i) for i in ids]
    return {"training": train_seeds, "held": held_seeds, "variants": variants}


def test_the_suite_is_a_split_of_the_comparison_per_topic_family_in_the_report_and_the_cli(
        desk, people, suite_desk, data_dir, tmp_path, capsys):
    from app.cli import main

    grown = grow(desk, people, suite_desk, training=4, held_out=2, per_seed=3)
    report = compare_candidate(desk, HATE, suite_desk["candidate"], resamples=200, seed=1)
    doc = report.document
    split = next(s for s in doc["splits"] if s["key"] == ADAPTIVE_KEY)
    every = {v for ids in grown["variants"].values() for v in ids}
    assert {item["id"] for item in split["items"]} == every  # no model trained on variants: all of them
    assert split["name"] == "Adaptive suite (18 validated variants of 6 seeds)"
    assert all(item["current"]["label"] == item["gold"] for item in split["items"])  # labelled as the target reads
    rows = {d.metric: d for d in report.differences if d.split == ADAPTIVE_KEY}
    assert set(rows) == {"accuracy", "macro_f1"} and rows["accuracy"].items == 18 and rows["accuracy"].current == 1.0
    right = sum(item["candidate"]["label"] == item["gold"] for item in split["items"])
    assert rows["accuracy"].candidate == pytest.approx(right / 18)
    adaptive = doc["adaptive_suite"]
    assert adaptive["held_out_only"] is False and adaptive["cases"] == 18 and adaptive["validated"] == 18
    assert "no compared model trained on validated variants" in adaptive["rule"]
    families = {row["family"]: row for row in adaptive["families"]}
    assert set(families) == {"derogation", "threatening language"}
    assert families["derogation"]["n"] + families["threatening language"]["n"] == 18
    wrong = sum(row["candidate"]["wrong"] for row in families.values())
    assert wrong == 18 - right and all(row["current"]["wrong"] == 0 for row in families.values())
    # the rule judges the suite as one more split; 18 variants are too few to judge, and it says so
    judged = {s.split: s for s in report.verdict.splits}
    assert judged[ADAPTIVE_KEY].state == TOO_FEW
    assert any(line.strip().startswith("Adaptive suite (18 validated variants of 6 seeds): too few to judge")
               for line in report.summary_lines())
    assert adaptive["rule"] in doc["evaluation"]["notes"]

    json_path, html_path = write_report(report, tmp_path / "out")
    html = html_path.read_text(encoding="utf-8")
    assert "Adaptive suite, per topic family" in html and "threatening language" in html
    assert json.loads(json_path.read_text(encoding="utf-8"))["adaptive_suite"]["families"]

    with pytest.raises(SystemExit) as stopped:
        main(["--data-dir", str(data_dir), "rounds", "compare", "--task", HATE, "--model",
              str(suite_desk["candidate"]), "--resamples", "200"])
    output = capsys.readouterr().out
    assert stopped.value.code == REFUSED_EXIT  # no split has enough items to judge
    assert "adaptive-suite" in output and adaptive["rule"] in output
    assert "topic family" in output and "threatening language" in output


def test_a_candidate_trained_on_variants_is_scored_on_held_out_seeds_variants_only(desk, people, suite_desk):
    grown = grow(desk, people, suite_desk, training=3, held_out=2, per_seed=2)
    trained = [v for seed in grown["training"] for v in grown["variants"][str(seed.id)]]
    held = {v for seed in grown["held"] for v in grown["variants"][str(seed.id)]}
    (suite_desk["candidate"] / MANIFEST_FILE).write_text(json.dumps({
        "format": MANIFEST_FORMAT, "format_version": 1, "task": HATE, "rounds": [1],
        "variants": {"count": len(trained), "taken": [{"id": v} for v in trained]}}), encoding="utf-8")
    report = compare_candidate(desk, HATE, suite_desk["candidate"], resamples=200)
    split = next(s for s in report.document["splits"] if s["key"] == ADAPTIVE_KEY)
    assert {item["id"] for item in split["items"]} == held and not held & set(trained)
    adaptive = report.document["adaptive_suite"]
    assert adaptive["held_out_only"] is True and adaptive["cases"] == len(held) and adaptive["validated"] == 10
    assert "held-out seeds" in adaptive["rule"] and "never scored on suite cases it trained on" in adaptive["rule"]
    assert split["name"] == "Adaptive suite, held-out seeds (4 variants of 2 seeds)"


def test_the_promotion_rule_refuses_a_candidate_significantly_worse_on_the_suite(desk, people, suite_desk):
    grow(desk, people, suite_desk, training=25, held_out=0, per_seed=4)
    report = compare_candidate(desk, HATE, suite_desk["candidate"], resamples=500)
    suite = next(d for d in report.differences if (d.split, d.metric) == (ADAPTIVE_KEY, "accuracy"))
    assert suite.items == 100 and suite.current == 1.0 and suite.high < 0
    verdict = report.verdict
    assert verdict.refused and verdict.worst is not None and verdict.worst.split == ADAPTIVE_KEY
    assert verdict.sentence.startswith("Refused: the candidate is worse than the current target on Adaptive suite")


def test_a_suite_too_small_to_judge_is_said_so_and_refuses_nothing():
    rows = [{"split": "held-out-1", "metric": m, "current": 0.7, "candidate": 0.8, "difference": 0.1, "low": 0.05,
             "high": 0.15, "items": 300} for m in ("accuracy", "macro_f1")]
    rows += [{"split": ADAPTIVE_KEY, "metric": m, "current": 1.0, "candidate": 0.5, "difference": -0.5, "low": -0.8,
              "high": -0.2, "items": 12} for m in ("accuracy", "macro_f1")]
    verdict = judge(rows, {ADAPTIVE_KEY: "Adaptive suite (12 validated variants of 3 seeds)",
                           "held-out-1": "Round 1 held-out"})
    assert not verdict.refused
    line = next(s.line() for s in verdict.splits if s.split == ADAPTIVE_KEY)
    assert line.startswith("Adaptive suite (12 validated variants of 3 seeds): too few to judge (n = 12; at least 97)")
    assert "1 split too few to judge" in verdict.sentence


def test_the_leaderboard_and_eval_score_every_model_on_the_suite_per_family(desk, people, suite_desk, data_dir,
                                                                             tmp_path, capsys):
    from app.cli import main
    from app.core.next_round.leaderboard import FRESH, STALE, fill_leaderboard
    from app.core.next_round.leaderboard_report import table_lines
    from app.views.leaderboard import build_leaderboard

    grown = grow(desk, people, suite_desk, training=3, held_out=1, per_seed=2)
    report = fill_leaderboard(desk, HATE)
    board = report.board
    column = next(c for c in board.columns if c.suite)
    assert (column.title, column.n, column.decided) == ("Adaptive suite", 8, 8) and "all 8 validated" in column.rule
    row = next(r for r in board.rows if r.current)
    cell = board.cell(row, column)
    assert cell.state == FRESH and cell.n == 8 and cell.accuracy == 1.0
    assert cell.families == (("derogation", 0, 4), ("threatening language", 0, 4))
    assert fill_leaderboard(desk, HATE).scored == 0  # kept, not scored again
    lines = table_lines(board)
    assert any("Adaptive suite (n=8 of 8 validated variants)" in line for line in lines) and column.rule in lines
    assert "banana detector, adaptive suite per topic family: derogation 0 of 4 wrong, threatening language 0 of 4 " \
           "wrong." in lines
    view = build_leaderboard(board)
    assert view.groups[-1].title == "Adaptive suite" and "adaptive suite" in view.summary
    assert "derogation: 0 of 4 wrong" in view.rows[0].cells[-3].tooltip
    # one more validated variant: the suite's cell is stale until refreshed
    add_variants(desk, people.lead, suite_desk["vetter"], suite_desk["current"], grown["training"][0],
                 [(f"a {TRIGGER} one more", "hate")], model_label=trigger_says)
    board = fill_leaderboard(desk, HATE).board
    column = next(c for c in board.columns if c.suite)
    assert column.n == 9 and board.cell(row, column).state == STALE
    board = fill_leaderboard(desk, HATE, refresh=True).board
    assert board.cell(row, column).state == FRESH and board.cell(row, column).n == 9

    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as stopped:
        main(["--data-dir", str(data_dir), "eval", "--models", "round:1", "--task", HATE, "--rounds", "none",
              "--no-identity-swap", "--no-robustness", "--out", str(out)])
    captured = capsys.readouterr()
    assert stopped.value.code in (0, None), captured.err
    doc = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    assert [s["key"] for s in doc["sets"]] == [ADAPTIVE_KEY] and len(doc["sets"][0]["cases"]) == 9
    figures = doc["results"]["m1"]["sets"][ADAPTIVE_KEY]
    assert figures["accuracy"] == 1.0 and set(figures["functionalities"]) == {"derogation", "threatening language"}
    assert [(r["family"], r["n"], r["m1"]["wrong"]) for r in doc["adaptive_suite"]["families"]] == [
        ("derogation", 5, 0), ("threatening language", 4, 0)]
    assert "Adaptive suite per topic family (wrong of n):" in captured.out
    assert doc["adaptive_suite"]["rule"] in doc["notes"]


def test_a_model_trained_on_variants_is_known_by_its_manifest_or_its_records_provenance():
    from types import SimpleNamespace

    from app.core.next_round.suite_split import trained_on_variants

    def record(summary=None, rows=None):
        return SimpleNamespace(provenance={"training": {"data": {"summary": summary or {}},
                                                        "rounds": {"rows": rows or {}}}})

    assert not trained_on_variants(None, [record({"variants": False}, {"base": 10}), SimpleNamespace(provenance=None)])
    assert trained_on_variants(None, [record(), record({"variants": {"taken": 4, "seeds": 2, "left_out": {}}})])
    assert trained_on_variants(None, [record(rows={"variants": 4})])
    assert trained_on_variants({"variants": {"count": 1}}) and not trained_on_variants({"variants": {"count": 0}})
