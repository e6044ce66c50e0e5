"""The round dialog's view-models, without Qt."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

from app.core.domain import FooledRule, RoundStatus
from app.views.rounds import RoundChanges, round_items, round_view

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def summary(**changes):
    settings = SimpleNamespace(label_start="fixed", fixed_label="hate", keep_label_after_submit=False,
                               context_policy="least_fooled", context_tag=None, assistant="ab")
    base = dict(id=A, number=2, status="open", description="d", goal_message="g", fooled_rule="all", settings=settings,
                models=[(C, "c", "cc" * 32), (A, "a", "aa" * 32)], opened_at=datetime(2026, 5, 1, tzinfo=UTC),
                closed_at=None, contexts=3, examples=7, fooled=2)
    return SimpleNamespace(**{**base, **changes})


def context(text, examples, fooled):
    return SimpleNamespace(text=text, tag="t", times_used=4, examples=examples,
                           fooling_rate=fooled / examples if examples else None)


def test_round_items_name_each_round():
    items = round_items([SimpleNamespace(id=A, number=1, status="closed"),
                         SimpleNamespace(id=B, number=2, status="open")])
    assert [(i.text, i.status) for i in items] == [("Round 1 · closed", RoundStatus.CLOSED),
                                                   ("Round 2 · open", RoundStatus.OPEN)]


def test_a_round_view_puts_the_targets_first_in_ensemble_order():
    candidates = [SimpleNamespace(id=i, name=n, sha256=n * 64) for i, n in ((A, "a"), (B, "b"), (C, "c"))]
    view = round_view(summary(), [context("two\n words", 4, 1), context("unused", 0, 0)], candidates)
    assert view.heading == "<b>Round 2</b> · open · opened 2026-05-01 · 7 examples, 2 fooled the model"
    assert view.is_open and view.fooled_rule is FooledRule.ALL and view.context_tag == ""
    assert view.assistant == "ab"
    assert [(m.text, m.checked) for m in view.models] == [
        (f"c  ({'c' * 12})", True), (f"a  ({'a' * 12})", True), (f"b  ({'b' * 12})", False)]
    assert [(r.text, r.tooltip, r.served, r.fooling_rate) for r in view.contexts] == [
        ("two words", "two\n words", "4", "25%"), ("unused", "unused", "4", "–")]
    assert view.context_count == "3 contexts (the 2 most served shown)"
    closed = round_view(summary(status="closed", contexts=2, closed_at=datetime(2026, 5, 9, tzinfo=UTC)),
                        [], [])
    assert not closed.is_open and "opened 2026-05-01, closed 2026-05-09" in closed.heading
    assert closed.context_count == "2 contexts (the 0 most served shown)"


def test_round_changes_give_the_settings_fields():
    changes = RoundChanges("d", "g", FooledRule.ANY, "blank", None, True, "random", "news")
    assert changes.settings() == {"label_start": "blank", "fixed_label": None, "keep_label_after_submit": True,
                                  "context_policy": "random", "context_tag": "news", "assistant": "off"}
    assert RoundChanges("d", "g", FooledRule.ANY, "blank", None, True, "random", None, "ab").settings()["assistant"] == "ab"


def test_a_model_choice_names_the_int8_check_or_why_it_serves_in_fp32():
    from app.core.int8_status import int8_detail, int8_status

    failed = {"export": {"parity": {"texts": 500, "agreement": 1.0, "p99_change": 0.01, "max_change": 0.02,
                                    "passed": False, "forced": True, "problems": ["only 500 task texts"]}}}
    assert int8_status(failed) == "int8 FORCED: 100.00% same label, p99 0.010 · 500 texts"
    assert "FAILED, kept with --force" in int8_detail(failed) and "(only 500 task texts)" in int8_detail(failed)
    refused = {"notes": ["Int8 refused: the int8 graph built here is not the one checked. The ONNX model is fp32."]}
    assert int8_status(refused) == "no int8 form" and int8_detail(refused).startswith("Int8 refused")
    trained = {"int8_check": {"recipe": None, "parity": None, "reason": "int8 not used: only 600 task texts"}}
    assert int8_status(trained) == "no int8 form" and "only 600 task texts" in int8_detail(trained)
    assert int8_status({}) == int8_status(None) == "" and int8_detail({"export": {"parity": {}}}).startswith("int8 parity: not")
