"""The Next round dialog's view-models, without Qt (the ETA: tests/views/test_stage_progress.py): the rounds' check boxes, the comparison's
table and chart from a comparison document, and what a promotion did."""

from __future__ import annotations

from types import SimpleNamespace

from app.core.services.next_round import BaseDefaults, RoundCount, TrainDefaults
from app.views.next_round import (
    BETTER,
    ESTIMATING,
    NO_ITEMS,
    UNCLEAR,
    WORSE,
    comparison_view,
    promotion_view,
    round_rows,
    train_setup,
)


def test_rounds_are_offered_with_their_counts_and_checked_by_use():
    counts = [RoundCount(1, "closed", 120, 12, 3, 2), RoundCount(2, "open", 0, 0, 4, 0), RoundCount(3, "open", 0, 0, 0, 0),
              RoundCount(4, "open", 0, 0, 0, 0, {"hatecheck": 2298})]
    rows = round_rows(counts)
    assert rows[0].text == "Round 1 (closed): 120 decided (12 held out), 3 undecided, 2 left out (flagged)"
    # imported cases are a choice of their own, not "left out"; a round of them alone can be chosen
    assert rows[3].text == "Round 4 (open): 0 decided (0 held out), 0 undecided, 2,298 imported (hatecheck)"
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


def test_the_comparison_table_and_chart_come_from_the_document():
    view = comparison_view(document(-0.02), "/c/comparison.html")
    assert view.worse and "worse" in view.verdict and view.report_path == "/c/comparison.html"
    assert view.headline == ("Held-out accuracy, all rounds: 70.0% → 60.0%, difference -10.0 pt [-25.0 pt, -2.0 pt] "
                             "over 30 examples.")
    first = view.rows[0]
    assert (first.split, first.metric, first.current, first.candidate, first.difference, first.interval) == (
        "All held-out splits", "accuracy", "70.0%", "60.0%", "-10.0 pt", "[-25.0 pt, -2.0 pt]")
    assert first.pooled and first.verdict == WORSE and first.items == 30
    assert (view.rows[1].metric, view.rows[1].interval, view.rows[1].verdict) == (
        "fooling examples now right", "–", NO_ITEMS)
    assert [r.verdict for r in view.rows[2:]] == [BETTER, UNCLEAR, UNCLEAR]
    assert view.rows[4].split == "base.csv, test split (seed 13)" and view.rows[4].metric == "macro-F1"
    # the chart: each round's held-out accuracy, then all together; the whiskers are current + the interval
    assert [(g.name, g.current, g.candidate, g.items) for g in view.groups] == [
        ("Round 1", 0.5, 0.75, 20), ("Round 2", 0.8, 0.7, 10), ("All held-out", 0.7, 0.6, 30)]
    assert (view.groups[0].low, view.groups[0].high) == (0.55, 0.9)
    assert view.notes == ("Warning: overlap!", "a note")
    clear = comparison_view(document(0.05))
    assert not clear.worse and "do not differ clearly" in clear.verdict


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
    assert view.lineage[3] == "Promoted by Lee Lead on 2026-11-24 08:00 UTC — over a worse comparison (recorded as forced)"
    assert view.publish_rounds == (1, 2) and view.publish_hint.endswith("dynadesk sync publish hate_speech --round 1 --round 2")
