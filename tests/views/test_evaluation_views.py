"""The Evaluate tab's view-models, built from a hand-made evaluation document, without Qt."""

from __future__ import annotations

from types import SimpleNamespace as NS

from app.views.evaluation import (
    AccuracyBar,
    EvaluationSettings,
    build_details,
    build_overview,
    elide,
    model_choice,
    performance_note,
    weights,
)

DIMENSIONS = ("performance", "throughput", "memory", "fairness", "robustness")
WEIGHTING = "each set counts equally"


def document(matrix_rows=()):
    utilities = {"performance": 0.8, "throughput": 0.5, "memory": 1.0, "fairness": None, "robustness": 0.25}
    return {
        "models": [{"key": "m1", "name": "Trigger model"}],
        "sets": [{"key": "round:1", "name": "Round 1 (validated)", "cases": []},
                 {"key": "suite", "name": "suite (HateCheck)", "cases": [{"id": "1"}, {"id": "2"}]}],
        "options": {"weights": {d: 1.0 for d in DIMENSIONS}},
        "matrix": {"rows": list(matrix_rows)},
        "warnings": ["WARNING: overlap"],
        "results": {"m1": {
            "score": {"score": 71.25, "utilities": utilities},
            "run": {"items_per_second": 123.4, "latency_p95_ms": 8.04, "memory_mb": None},
            "all_rounds": {"accuracy": 0.5, "macro_f1": 0.4},
            "robustness": {"accuracy": 0.5, "clean_accuracy": 0.75, "kinds": {"leet_speak": {"accuracy": 0.5}}},
            "sets": {"suite": {"accuracy": 0.5, "macro_f1": 0.4567, "n": 2,
                               "functionalities": {"b": {"accuracy": 1.0, "n": 1}, "a": {"accuracy": 0.0, "n": 1}},
                               "targets": {"women": {"accuracy": 0.5, "n": 2}}}}}},
    }


def test_overview_summary_and_matrix():
    view = build_overview(document(), DIMENSIONS, WEIGHTING)
    assert view.summary.headers[:4] == ("Model", "Score", "Performance", "suite\nF1, n=2")
    row = view.summary.rows[0]
    assert [c.text for c in row] == ["Trigger model", "71.2", "0.80", "0.46", "0.50", "1.00", "–", "0.25",
                                     "123", "8.0", "–"]
    assert row[2].shade == 0.8 and row[0].shade is None and row[6].shade is None
    assert row[1].right and row[6].right and not row[0].right
    assert "<b>Performance</b> = macro-F1 on suite (n=2)." in view.explanation
    assert "Spelling perturbations: accuracy 50.0% vs 75.0% clean (leet speak 50.0%)." in view.explanation
    assert view.warnings == ("WARNING: overlap",)
    assert [c.text for c in view.matrix.rows[0]] == ["(no round has validated examples yet)", "", ""]
    assert [s.key for s in view.sets] == ["round:1", "suite"] and view.preferred_set == 1
    rows = [{"name": "Round 1", "n": 4, "cells": {"m1": {"accuracy": 0.5, "macro_f1": 0.4}}}]
    matrix = build_overview(document(rows), DIMENSIONS, WEIGHTING).matrix
    assert [[c.text for c in r] for r in matrix.rows] == [["Round 1", "4", "50.0% / F1 0.40"],
                                                          ["All rounds", "4", "50.0% / F1 0.40"]]


def test_details_worst_functionality_first_and_failing_cases():
    failing = [{"id": "7", "text": "some text", "gold": "hate", "predicted": "not hate", "confidence": 0.912,
                "functionality": "derog", "target": None}]
    view = build_details(document(), "m1", "suite", failing)
    assert view.figures == "Accuracy <b>50.0%</b>, macro-F1 <b>0.457</b> over 2 cases."
    assert view.functionalities == (AccuracyBar("a", 0.0, "0.0% of 1"), AccuracyBar("b", 1.0, "100.0% of 1"))
    assert view.targets == (AccuracyBar("women", 0.5, "50.0% of 2"),)
    case = view.failing[0]
    assert (case.id, case.target, case.confidence) == ("7", "", "0.91")
    assert [c.text for c in view.failing_table.rows[0]] == ["7", "derog", "", "some text", "hate", "not hate", "0.91"]
    assert view.failing_table.headers[0] == "Case" and view.failing_table.rows[0][0].right


def test_model_choices_settings_and_small_helpers():
    records = [NS(id=1, name="X, PyTorch", format="hf-torch", sha256="a" * 64),
               NS(id=2, name="X (ONNX)", format="onnx", sha256="b" * 64),
               NS(id=3, name="X (ONNX int8)", format="onnx", sha256="c" * 64)]
    family = model_choice(records, ["PyTorch folder", "ONNX", "ONNX int8"], "X", checked=True)
    assert family.key == "" and family.name == "X" and family.detail.startswith("X: one model in 3 formats")
    assert [(f.key, f.name, f.checked) for f in family.formats] == [
        ("1", "PyTorch folder", False), ("2", "ONNX", False), ("3", "ONNX int8", True)]
    single = model_choice(records[:1], ["PyTorch folder"], "X")
    assert (single.key, single.name, single.formats) == ("1", "X, PyTorch", ())
    assert single.detail == "X, PyTorch: hf-torch, sha256 aaaaaaaaaaaa…"
    assert [(w.dimension, w.title, w.default) for w in weights(("performance",), {"performance": 4.0})] == [
        ("performance", "Performance", 4.0)]
    settings = EvaluationSettings(("m1",), True, "", "", "", False, True, (("performance", 3.0),))
    assert settings.weight_map() == {"performance": 3.0}
    sets = [{"name": "Round 2", "cases": [1] * 5}, {"name": "suite (x)", "cases": [1] * 40}]
    note = performance_note(sets, WEIGHTING)
    assert "mean of the macro-F1 of 2 sets, each set counts equally: Round 2 (n=5), suite (n=40)." in note
    assert note.endswith("Round 2: under 30 cases, a rough figure that still counts fully.")
    assert elide("a" * 40) == "a" * 17 + "…" + "a" * 18
