"""The Next round dialog's view-models, without Qt (the ETA: tests/views/test_stage_progress.py): the rounds' check boxes, the comparison's
table and chart from a comparison document, and what a promotion did."""

from __future__ import annotations

from types import SimpleNamespace

from app.core.next_round.inputs import BaseDefaults, RoundCount, TrainDefaults
from app.views.next_round import (
    NO_ITEMS,
    TOO_FEW,
    base_columns_view,
    comparison_view,
    promotion_view,
    round_rows,
    train_setup,
)


def test_rounds_are_offered_with_their_counts_and_checked_by_use():
    counts = [RoundCount(1, "closed", 120, 12, 3, 2), RoundCount(2, "open", 0, 0, 4, 0), RoundCount(3, "open", 0, 0, 0, 0),
              RoundCount(4, "open", 0, 0, 0, 0, {"hatecheck": 2298}, {"hatecheck": 235})]
    rows = round_rows(counts)
    assert rows[0].text == "Round 1 (closed): 120 decided (12 held out), 3 undecided, 2 left out (flagged)"
    # imported cases are a choice of their own, not "left out"; a round of them alone can be chosen
    assert rows[3].text == ("Round 4 (open): 0 decided (0 held out), 0 undecided, 2,298 imported (hatecheck; 235 held "
                            "out)")
    assert [(r.checked, r.enabled) for r in rows] == [(True, True), (False, True), (False, False), (False, True)]
    assert [r.checked for r in round_rows(counts, chosen=(2,))] == [False, True, False, False]  # as last used


def test_the_setup_starts_from_the_base_encoder_when_no_target_was_trained_by_dynadesk():
    counts = [RoundCount(1, "open", 10, 1, 0, 0)]
    base = BaseDefaults("/data/davidson.csv", "tweet", "class", {"0": "hate"}, True, "as last used (candidate x)")
    setup = train_setup("hate_speech", "Hate speech", counts, TrainDefaults(base, "target", "5", False, (1,), None, ""),
                        "/desk/candidates", "0=hate")
    assert setup.start_from == "base" and setup.warm_target == "" and setup.round_weight == "5"
    assert (setup.base_path, setup.text_column, setup.label_map, setup.html_unescape) == (
        "/data/davidson.csv", "tweet", "0=hate", True)
    assert setup.base_note == "Pre-filled as last used (candidate x)." and setup.promote_allowed
    unset = train_setup("hate_speech", "Hate speech", counts, TrainDefaults(None, "target", "auto", False, (), "T", ""),
                        "/c", "", promote_reason="not allowed", publish_reason="no server")
    assert unset.start_from == "target" and unset.warm_target == "T" and "alone" in unset.base_note
    assert not unset.promote_allowed and not unset.publish_possible


def test_a_pair_task_asks_for_its_context_column_and_keeps_the_last_one():
    counts = [RoundCount(1, "open", 10, 1, 0, 0)]
    base = BaseDefaults("/data/nli.csv", "hypothesis", "label", None, False, "as last used (candidate x)", "premise")
    defaults = TrainDefaults(base, "target", "auto", False, (1,), "T", "")
    nli = train_setup("nli", "NLI", counts, defaults, "/c", "", inputs=("Context", "Hypothesis"))
    assert (nli.context_input, nli.context_column, nli.text_input) == ("Context", "premise", "Hypothesis")
    single = train_setup("hate_speech", "Hate speech", counts, defaults, "/c", "")
    assert (single.context_input, single.context_column, single.text_input) == ("", "", "Text")
    columns = ("premise", "hypothesis", "label")
    pairs = base_columns_view("nli.csv", columns, "hypothesis", "label", "premise", pairs=True)
    assert pairs.context_column == "premise" and "context “premise” and text “hypothesis”" in pairs.note
    assert "did not give away" not in pairs.note
    missing = base_columns_view("nli.csv", ("a", "hypothesis", "label"), "hypothesis", "label", None, pairs=True)
    assert missing.context_column == "" and "did not give away" in missing.note
    plain = base_columns_view("nli.csv", columns, "hypothesis", "label", "premise")
    assert plain.context_column == "" and "context" not in plain.note


def difference(split, metric, current, candidate, low, high, items=20):
    return {"split": split, "metric": metric, "current": current, "candidate": candidate,
            "difference": None if current is None else candidate - current, "low": low, "high": high, "items": items}


def document(pooled_high: float) -> dict:
    pooled = difference("held-out", "accuracy", 0.70, 0.60, -0.25, pooled_high, 30)
    return {
        "splits": [{"key": "held-out-1", "name": "Round 1 held-out", "kind": "round"},
                   {"key": "held-out-2", "name": "Round 2 held-out", "kind": "round"},
                   {"key": "base-test", "name": "base.csv, test split (seed 13)", "kind": "dataset"}],
        "differences": [pooled, difference("held-out", "fooling_right", None, None, None, None, 0),
                        difference("held-out-1", "accuracy", 0.5, 0.75, 0.05, 0.4),
                        difference("held-out-2", "accuracy", 0.8, 0.7, -0.2, 0.05, 10),
                        difference("base-test", "macro_f1", 0.9, 0.9, -0.01, 0.01)],
        "pooled": pooled, "worse": pooled_high < 0,
        "current": {"name": "Round 1 target", "round": 1}, "candidate": {"name": "next (candidate)"},
        "evaluation": {"warnings": ["overlap!"], "notes": ["a note"]},
    }


def team_run_document() -> dict:
    """The team run's comparison: one held-out round example (100 % -> 100 %), and the base data's test split
    measurably worse (92.0 % -> 91.2 %, -0.7 pt [-1.3, -0.1], n = 2,479); the verdict read "do not differ
    clearly" and the owner's Promote went through in one click."""
    held = [difference(split, metric, 1.0, 1.0, 0.0, 0.0, 1) for split in ("held-out", "held-out-1")
            for metric in ("accuracy", "macro_f1")]
    base = [{**difference("base-test", "accuracy", 0.920, 0.912, -0.013, -0.001, 2479), "difference": -0.0073},
            difference("base-test", "macro_f1", 0.712, 0.705, -0.021, 0.006, 2479)]
    return {
        "splits": [{"key": "held-out-1", "name": "Round 1 held-out", "kind": "round"},
                   {"key": "base-test", "name": "labeled_data.csv, test split (seed 13)", "kind": "dataset"}],
        "differences": held[:2] + held[2:] + base, "pooled": held[0], "worse": False,
        "current": {"name": "Round 1 target", "round": 1}, "candidate": {"name": "hate_speech rounds 1 (candidate)"},
        "evaluation": {"warnings": [], "notes": []},
    }


def test_the_team_run_case_is_refused_naming_the_worst_split_with_every_split_listed():
    view = comparison_view(team_run_document())
    assert view.worse  # the document's own "worse" (the old pooled rule) said False: the one rule decides
    assert view.verdict.startswith("Refused: the candidate is worse than the current target on labeled_data.csv, "
                                   "test split (seed 13) (accuracy 92.0% → 91.2%, -0.7 pt [-1.3, -0.1], n = 2,479)")
    assert "Promote anyway" in view.verdict
    assert view.judged == ("Round 1 held-out: too few to judge (n = 1; at least 97) — accuracy 100.0% → 100.0%, "
                           "+0.0 pt [+0.0, +0.0]; macro-F1 100.0% → 100.0%, +0.0 pt [+0.0, +0.0]",
                           "labeled_data.csv, test split (seed 13): worse — accuracy 92.0% → 91.2%, -0.7 pt "
                           "[-1.3, -0.1]; macro-F1 71.2% → 70.5%, -0.7 pt [-2.1, +0.6]; n = 2,479")
    from app.views.next_round import TOO_FEW

    assert {r.verdict for r in view.rows if r.items == 1} == {TOO_FEW}  # no colour for an interval of one item


def test_the_comparison_table_and_chart_come_from_the_document():
    view = comparison_view(document(-0.02), "/c/comparison.html")
    assert view.worse and "Refused" in view.verdict and view.report_path == "/c/comparison.html"
    assert view.headline == ("Held-out accuracy, all rounds: 70.0% → 60.0%, difference -10.0 pt [-25.0 pt, -2.0 pt] "
                             "over 30 examples.")
    first = view.rows[0]
    assert (first.split, first.metric, first.current, first.candidate, first.difference, first.interval) == (
        "All held-out splits", "accuracy", "70.0%", "60.0%", "-10.0 pt", "[-25.0 pt, -2.0 pt]")
    assert first.pooled and first.verdict == TOO_FEW and first.items == 30
    assert (view.rows[1].metric, view.rows[1].interval, view.rows[1].verdict) == (
        "fooling examples now right", "–", NO_ITEMS)
    assert [r.verdict for r in view.rows[2:]] == [TOO_FEW, TOO_FEW, TOO_FEW]  # 20, 10, 20 items: too few to colour
    assert view.rows[4].split == "base.csv, test split (seed 13)" and view.rows[4].metric == "macro-F1"
    # the chart: each round's held-out accuracy, then all together; the whiskers are current + the interval
    assert [(g.name, g.current, g.candidate, g.items) for g in view.groups] == [
        ("Round 1", 0.5, 0.75, 20), ("Round 2", 0.8, 0.7, 10), ("All held-out", 0.7, 0.6, 30)]
    assert (view.groups[0].low, view.groups[0].high) == (0.55, 0.9)
    assert view.notes == ("Warning: overlap!", "a note")
    clear = comparison_view(document(0.05))  # no split has the 97 items the rule needs: refused all the same
    assert clear.worse and "no split has enough examples" in clear.verdict


def test_the_promotion_summary_names_the_rounds_the_target_and_its_lineage():
    lineage = {"parent_models": [{"name": "Round 1 target", "sha256": "ab" * 32}],
               "manifest": {"path": "/c/manifest.json", "sha256": "cd" * 32},
               "comparison": {"pooled": {"current": 0.7, "candidate": 0.8, "difference": 0.1, "low": 0.02, "high": 0.2}},
               "promoted_by": {"name": "Lee Lead"}, "promoted_at": "2026-11-24T08:00:01.5+00:00"}
    promotion = SimpleNamespace(task_code="hate_speech", previous_round=1, round_number=2, forced=True, lineage=lineage,
                                targets=[], summary_lines=lambda: ["Closed hate_speech round 1."])
    view = promotion_view(promotion)
    assert view.round_number == 2 and view.lines == ("Closed hate_speech round 1.",)
    assert view.lineage[0] == f"Parent target(s): Round 1 target ({'ab' * 6})"
    assert "manifest.json (sha256 cdcdcdcdcdcd)" in view.lineage[1]
    assert view.lineage[2] == "Comparison: held-out accuracy 70.0% → 80.0%, difference +10.0 pt [+2.0 pt, +20.0 pt]"
    assert view.lineage[3] == ("Promoted by Lee Lead on 2026-11-24 08:00 UTC — over the promotion rule's refusal "
                               "(recorded as forced, with the figures)")
    assert view.publish_rounds == (1, 2) and view.publish_hint.endswith("dynadesk sync publish hate_speech --round 1 --round 2")
