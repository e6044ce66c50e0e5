"""Every field on the wire carries the one bound of ``app.core.limits``, by construction: the models are
found from the modules that define the wire and from the server's route table (bodies and answers),
nested models included, and any free text or free JSON field without a ``Bound`` fails here."""

from __future__ import annotations

import inspect
import uuid
from typing import Annotated, Any

import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from app.core.limits import Bound, unbounded_fields
from sync import proposal_wire, protocol, wellbeing_wire
from sync.protocol import Strict

WIRE_MODULES = (protocol, proposal_wire, wellbeing_wire)


def wire_models(tmp_path) -> set[type[BaseModel]]:
    """The pydantic models defined in the wire modules, and every body and answer model of the app's routes."""
    from sync.server.app import create_app
    from sync.server.db import ServerDatabase

    found = {obj for module in WIRE_MODULES for _name, obj in inspect.getmembers(module, inspect.isclass)
             if issubclass(obj, BaseModel) and obj.__module__ == module.__name__}
    db = ServerDatabase(f"sqlite:///{tmp_path / 'server.sqlite'}")
    try:
        app = create_app(db, tmp_path / "data")
        for route in app.routes:
            if not isinstance(route, APIRoute):
                continue
            for field in [route.body_field, route.response_field, *route.dependant.body_params]:
                annotation = getattr(getattr(field, "field_info", None), "annotation", None)
                found |= _models_in(annotation)
    finally:
        db.close()
    return found


def _models_in(annotation: Any) -> set[type[BaseModel]]:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in _models_in(arg)}


def test_every_wire_field_carries_a_bound(tmp_path):
    models = wire_models(tmp_path)
    names = {m.__name__ for m in models}
    # The enumeration reaches every family of the wire (not only what this test's author thought of).
    assert {"ExampleRecord", "AssistanceWire", "TaskSettingRecord", "ProposalCreate",
            "ProposalWire", "TaskPolicyWire", "ModelForms", "ExposureWire", "WellbeingItem", "ErrorBody",
            "PushRequest", "ChangesResponse"} <= names
    unbounded = sorted({where for model in models for where in unbounded_fields(model)})
    assert unbounded == []


class _Unbounded(Strict):
    note: str
    figures: dict[str, Any]
    items: list[Any] | None = None


class _Nested(Strict):
    ok: Annotated[str, Bound.line(10)]
    inner: list[_Unbounded]
    mapping: dict[Annotated[str, Bound.line(10)], str]


def test_the_checker_finds_a_deliberately_unbounded_field_however_deep():
    assert unbounded_fields(_Unbounded) == ["_Unbounded.note", "_Unbounded.figures[]", "_Unbounded.items[]"]
    assert unbounded_fields(_Nested) == ["_Unbounded.note", "_Unbounded.figures[]", "_Unbounded.items[]",
                                         "_Nested.mapping[]"]


def test_a_bound_is_its_own_validator():
    class Figures(Strict):
        figures: protocol.FreeJson
        name: protocol.Name
        note: protocol.Short | None = None

    deep: dict[str, Any] = {}
    for _ in range(300):  # 608 bytes that no serialiser can write back
        deep = {"a": deep}
    for bad, said in [({"figures": deep, "name": "x"}, "nested 301 levels deep"),
                      ({"figures": {"n": 2**70}, "name": "x"}, "integer beyond"),
                      ({"figures": {"k": "bell\x07"}, "name": "x"}, "control characters (\\x07)"),
                      ({"figures": {"k\x1b[2J": 1}, "name": "x"}, "control characters (\\x1b)"),
                      ({"figures": {}, "name": "Eve\u202eevil"}, "control characters (\\u202e)"),
                      ({"figures": {}, "name": "x", "note": "a\x00b"}, "control characters (\\x00)"),
                      ({"figures": {}, "name": "x" * 201}, "at most 200")]:
        with pytest.raises(ValidationError) as refused:
            Figures.model_validate(bad)
        assert said in str(refused.value), (said, str(refused.value))
    kept = Figures.model_validate({"figures": {"why": "line one\nline two\tend"}, "name": "x",
                                   "note": "two\nlines"})
    assert kept.note == "two\nlines"


def test_shown_text_is_escaped_and_cut_never_refused():
    body = protocol.ErrorBody(detail="refused Eve\x1b[2J" + "x" * 70_000,
                              errors=[protocol.RecordError(id=str(uuid.uuid4()) + "\x07" * 100, reason="\x00")])
    assert "\x1b" not in body.detail and "Eve\\x1b[2J" in body.detail and len(body.detail) == 64 * 1024
    assert body.errors[0].reason == "\\x00" and len(body.errors[0].id or "") == 64
