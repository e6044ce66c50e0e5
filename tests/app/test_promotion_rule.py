"""The promotion rule (app/core/next_round/promotion_rule.py) on hand-built differences whose figures are
known: the team run's case, a candidate better everywhere, one better on the round but worse on a suite."""

from __future__ import annotations

import math

import pytest

from app.core.domain import Role
from app.core.next_round.comparison import ComparisonReport, Difference
from app.core.next_round.promotion_rule import (
    BETTER,
    NO_ITEMS,
    TOO_FEW,
    UNCLEAR,
    WORSE,
    difference_state,
    judge,
    may_promote,
    may_propose,
    minimum_items,
)

NAMES = {"held-out-1": "Round 1 held-out", "held-out-2": "Round 2 held-out", "base-test": "davidson.csv, test split",
         "suite-hatecheck": "hatecheck (suite, 3,728 cases)", "held-out": "All held-out splits"}


def rows(split: str, n: int, accuracy: tuple[float, float, float, float, float],
         macro_f1: tuple[float, float, float, float, float] | None = None) -> list[Difference]:
    """(current, candidate, difference, low, high) per metric."""
    out = [Difference(split, "accuracy", *accuracy, n)]
    out.append(Difference(split, "macro_f1", *(macro_f1 or accuracy), n))
    out.append(Difference(split, "fooling_right", 0.0, 1.0, 1.0, 1.0, 1.0, 1))  # never judged
    return out


def team_run() -> list[Difference]:
    """One held-out round example (100 % -> 100 %) and a base test split measurably worse."""
    return (rows("held-out", 1, (1.0, 1.0, 0.0, 0.0, 0.0)) + rows("held-out-1", 1, (1.0, 1.0, 0.0, 0.0, 0.0))
            + rows("base-test", 2479, (0.920, 0.912, -0.007, -0.013, -0.001), (0.71, 0.70, -0.01, -0.03, 0.01)))


def test_the_minimum_n_follows_from_the_widest_interval():
    assert minimum_items() == math.ceil((1.959964 / 0.2) ** 2) == 97
    assert minimum_items(0.1) == 385  # a narrower interval needs four times the items


def test_the_team_run_case_is_refused_naming_the_base_test_split_and_listing_every_split():
    verdict = judge(team_run(), NAMES)
    assert verdict.refused
    assert verdict.worst is not None and verdict.worst.split == "base-test"
    assert "davidson.csv, test split" in verdict.sentence and "-0.7 pt [-1.3, -0.1]" in verdict.sentence
    states = {s.split: s.state for s in verdict.splits}
    assert states == {"held-out-1": TOO_FEW, "base-test": WORSE}  # one round: the pooled split is that round again
    lines = verdict.lines()
    assert lines[0] == verdict.sentence and len(lines) == 3
    assert "Round 1 held-out: too few to judge (n = 1; at least 97)" in lines[1]
    assert "92.0% → 91.2%" in lines[2] and "n = 2,479" in lines[2]
    report = ComparisonReport("hate_speech", "c" * 64, ("a" * 64,), tuple(team_run()), team_run()[0],
                              {"splits": [{"key": k, "name": v} for k, v in NAMES.items()]})
    assert report.worse and report.summary_lines() == lines


def test_a_candidate_better_everywhere_passes():
    verdict = judge(rows("held-out-1", 120, (0.70, 0.80, 0.10, 0.04, 0.16))
                    + rows("base-test", 2479, (0.90, 0.92, 0.02, 0.01, 0.03))
                    + rows("suite-hatecheck", 3728, (0.60, 0.70, 0.10, 0.08, 0.12)), NAMES)
    assert not verdict.refused
    assert verdict.sentence.startswith("The candidate is better than the current target on every split")
    assert "davidson.csv, test split" in verdict.sentence  # the least gain is named


def test_better_on_the_round_but_worse_on_a_suite_is_refused_with_the_suite_named():
    verdict = judge(rows("held-out-1", 235, (0.62, 0.83, 0.21, 0.15, 0.27))
                    + rows("base-test", 2479, (0.90, 0.90, 0.0, -0.01, 0.01))
                    + rows("suite-hatecheck", 3728, (0.70, 0.66, -0.04, -0.06, -0.02)), NAMES)
    assert verdict.refused and verdict.worst.split == "suite-hatecheck"
    assert "worse than the current target on hatecheck (suite, 3,728 cases)" in verdict.sentence


def test_macro_f1_worse_alone_refuses_and_too_few_everywhere_refuses():
    verdict = judge(rows("base-test", 500, (0.90, 0.90, 0.0, -0.01, 0.01), (0.70, 0.60, -0.10, -0.15, -0.05)), NAMES)
    assert verdict.refused and "macro-F1" in verdict.sentence
    verdict = judge(rows("held-out-1", 9, (0.5, 0.9, 0.4, 0.1, 0.7)) + rows("held-out-2", 12, (0.5, 0.9, 0.4, 0.1, 0.7))
                    + rows("held-out", 21, (0.5, 0.9, 0.4, 0.2, 0.6)), NAMES)
    assert verdict.refused and "no split has enough examples" in verdict.sentence
    assert "All held-out splits, has n = 21; at least 97" in verdict.sentence  # two rounds: the pooled split counts
    assert judge([], NAMES).refused


@pytest.mark.parametrize("high", [-0.001, 0.0])
def test_only_an_upper_bound_below_zero_is_worse(high):
    verdict = judge(rows("base-test", 400, (0.9, 0.89, -0.01, -0.02, high)), NAMES)
    assert verdict.refused == (high < 0)


@pytest.mark.parametrize(("low", "high", "items", "state"), [
    (-0.02, -0.001, 400, WORSE), (0.001, 0.03, 400, BETTER), (-0.02, 0.0, 400, UNCLEAR), (0.0, 0.02, 400, UNCLEAR),
    (-0.3, -0.1, 96, TOO_FEW), (0.1, 0.3, 96, TOO_FEW), (-0.3, -0.1, 97, WORSE),  # the minimum n is 97
    (None, None, 0, NO_ITEMS), (None, None, 400, NO_ITEMS), (0.0, 0.0, 0, NO_ITEMS)])
def test_one_difference_reads_as_the_rule_judges_a_split(low, high, items, state):
    assert difference_state(low, high, items) == state
    figures = rows("base-test", items, (0.9, 0.9, 0.0, low, high)) if low is not None else []
    if state in (WORSE, BETTER, UNCLEAR, TOO_FEW):  # the split (both metrics alike) is judged the same way
        assert judge(figures, NAMES).splits[0].state == state
    assert difference_state(-0.3, -0.1, 96, minimum=50) == WORSE  # a smaller minimum, as asked


@pytest.mark.parametrize(("role", "policy", "server", "promote", "propose"), [
    (Role.OWNER, False, True, True, False), (Role.OWNER, False, False, True, False),
    (Role.LEAD, False, True, False, True), (Role.LEAD, True, True, True, True),
    (Role.LEAD, False, False, True, False),  # no team server: nobody else could decide, and none to propose to
    (Role.ANNOTATOR, True, True, False, False), (Role.ANNOTATOR, True, False, False, False)])
def test_who_may_promote_and_who_may_propose_instead(role, policy, server, promote, propose):
    assert may_promote(role, policy, team_server=server) is promote
    assert may_promote(role.value, policy, team_server=server) is promote  # as the server stores a role
    assert may_propose(role, team_server=server) is propose
