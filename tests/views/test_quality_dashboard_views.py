"""The Dashboard quality view's view-models, built without Qt from a real report on small hand-made data."""

from __future__ import annotations

import math

from app.core.quality.report import AlertThresholds, QualityData, quality_report
from app.views.quality_dashboard import build_quality, build_term_examples

ROUNDS = {"r1": 1, "r2": 2}
NAMES = {"ana": "Ana", "ben": "Ben"}


def data() -> QualityData:
    rows = []
    for i in range(6):  # round 1: "not" gives hate away; Ana writes all of it
        rows.append((f"a{i}", "r1", "ana", f"they are not welcome {i}", "hate"))
        rows.append((f"b{i}", "r1", "ana", f"people are lovely {i}", "not hate"))
    for i in range(6):  # round 2: "not" again, Ben's
        rows.append((f"c{i}", "r2", "ben", f"not ok {i}", "hate"))
        rows.append((f"d{i}", "r2", "ben", f"fine {i}", "not hate"))
    return QualityData.from_rows(rows, ROUNDS, NAMES, ["hate", "not hate"])


def test_the_latest_round_by_default_with_recurring_terms_marked():
    report = quality_report(data(), min_count=3)
    figures = build_quality(report, round_number=None)
    assert figures.heading == "Round 2: 12 examples"
    by_term = {row.key: [c.text for c in row.cells] for row in figures.artifacts.rows}
    # "not": 6 examples, all hate, base 1/2: z = sqrt(6); listed in both rounds
    assert by_term["not"] == ["not", "hate", "6", "6", "100.0%", "50.0%", f"{math.sqrt(6):.2f}", "1, 2 ↻"]
    assert figures.recurring == ("not",)
    assert figures.rounds == (1, 2)
    distinct_1 = figures.distinct[0].values
    # round 2: "not ok i" x 6 and "fine i" x 6 are 30 words; distinct: not, ok, fine, 0..5 = 9
    assert distinct_1[1] == 9 / 30
    # round 1: "they are not welcome i" and "people are lovely i" x 6: 54 words; distinct: they, are, not,
    # welcome, people, lovely and 0..5 = 12
    assert distinct_1[0] == 12 / 54
    assert all(math.isnan(v) for v in figures.spread[0].values)  # not measured yet
    assert "Click a term" in figures.artifact_note


def test_one_annotators_table_and_the_alerts():
    report = quality_report(data(), min_count=3, by_annotator=True, thresholds=AlertThresholds(artifact_z=2.4))
    figures = build_quality(report, round_number=1, author="ana", alerts=report.alerts)
    assert figures.heading == "Round 1, Ana: 12 examples"
    assert {row.key for row in figures.artifacts.rows} >= {"not", "lovely"}
    mine = {row.key: row.cells[-1].text for row in figures.artifacts.rows}
    assert mine["not"] == "1, 2 ↻" and mine["lovely"] == "1"  # the round tables' marks
    assert any("“not”" in message and "z 2.45" in message for message in figures.alerts)
    nobody = build_quality(report, round_number=1, author="ben")
    assert nobody.heading == "Round 1, Ben: no examples" and nobody.artifacts.rows == ()


def test_term_examples_are_counted_and_capped():
    found = build_term_examples("not", ["a", "b", "c"], ["hate"] * 3, ["Ana"] * 3, where="round 1", limit=2)
    assert found.title == "“not” in round 1: 3 examples (first 2 shown)"
    assert [e.text for e in found.examples] == ["a", "b"]
    one = build_term_examples("not", ["a"], ["hate"], ["Ana"], where="round 2")
    assert one.title == "“not” in round 2: 1 example"
