"""Which sync protocol a desk and a server speak together, and records in the older one's shape.

Every request and every answer says the protocol its sender speaks and the lowest it still speaks
(``Dynadesk-Protocol``, ``Dynadesk-Protocol-Lowest``). A request without them comes from a desk of
protocol 1 (release 0.1), which sent none; an answer without them from a server of protocol 1, whose
``/me`` says ``protocol: 1``. Both sides then use the higher version both speak; when there is none (the
two are further apart than one version) each refuses in one sentence that names both versions.

What a protocol version brought onto the wire is listed in ``sync.wire_versions``. A record or answer
sent to an older side leaves those out: a record of a newer kind entirely, a newer field always. Both are
*held back* when they carry something (a newer field set to other than its default): the server counts
them for the desk and sends them again once it speaks the newer version; the desk keeps them in its
outbox until the server speaks it.

The registry is read when a record is shaped, never copied at import (tests register entries of their own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from sync import protocol as wire
from sync import wire_versions

PROTOCOL_HEADER = "Dynadesk-Protocol"
LOWEST_HEADER = "Dynadesk-Protocol-Lowest"
FIRST_PROTOCOL = 1  # what a side that says nothing speaks: release 0.1 sent no protocol headers

# The first release of each protocol version, for messages ("wait for the server's upgrade to Dynadesk 0.2").
PROTOCOL_RELEASES = {1: "0.1", 2: "0.2"}


def release_of(protocol: int) -> str:
    """The Dynadesk release that first spoke ``protocol`` ("0.2"), or how it is named when unknown here."""
    known = PROTOCOL_RELEASES.get(protocol)
    return f"Dynadesk {known}" if known else f"a Dynadesk that speaks sync protocol {protocol}"


def our_headers() -> dict[str, str]:
    return {PROTOCOL_HEADER: str(wire_versions.PROTOCOL_VERSION),
            LOWEST_HEADER: str(wire_versions.LOWEST_PROTOCOL)}


class Unreadable(ValueError):
    """Protocol headers that are not whole numbers (or say a lowest above the version)."""


def said(headers: Mapping[str, str], *, fallback: int = FIRST_PROTOCOL) -> tuple[int, int]:
    """(protocol, lowest) a request's or answer's headers say; ``fallback`` for both when there are none."""
    version, lowest = headers.get(PROTOCOL_HEADER), headers.get(LOWEST_HEADER)
    if version is None:
        return fallback, fallback
    try:
        speaks = int(version.strip())
        down_to = int(lowest.strip()) if lowest is not None else speaks
    except ValueError:
        raise Unreadable(f"the header {PROTOCOL_HEADER}: {version[:20]!r} (or its lowest) is not a whole number") from None
    if not 1 <= down_to <= speaks <= 10**6:
        raise Unreadable(f"the headers say protocol {speaks}, down to {down_to}")
    return speaks, down_to


def common(speaks: int, lowest: int) -> int | None:
    """The protocol this side and one that speaks ``speaks`` down to ``lowest`` use together; None: none."""
    version = min(speaks, wire_versions.PROTOCOL_VERSION)
    return version if version >= max(lowest, wire_versions.LOWEST_PROTOCOL) else None


def server_refusal(speaks: int, lowest: int, server_release: str) -> str:
    """The server's one sentence to a desk outside its window."""
    ours, our_lowest = wire_versions.PROTOCOL_VERSION, wire_versions.LOWEST_PROTOCOL
    if speaks < our_lowest:
        return (f"This desk speaks sync protocol {speaks} ({release_of(speaks)}) and this server (Dynadesk "
                f"{server_release}) serves protocol {our_lowest} to {ours}: upgrade this desk to sync with it.")
    return (f"This desk speaks sync protocol {lowest} at the lowest and this server (Dynadesk {server_release}) "
            f"speaks protocol {ours} at most: the server must be upgraded before this desk can sync with it.")


def desk_refusal(speaks: int, lowest: int, server_release: str) -> str:
    """The desk's one sentence about a server outside its window."""
    from app import __version__

    ours, our_lowest = wire_versions.PROTOCOL_VERSION, wire_versions.LOWEST_PROTOCOL
    if speaks < our_lowest:
        return (f"The server runs Dynadesk {server_release}, which speaks sync protocol {speaks}, and this Dynadesk "
                f"{__version__} speaks protocol {our_lowest} to {ours}: the server must be upgraded before this "
                "desk can sync with it.")
    return (f"The server runs Dynadesk {server_release}, which speaks sync protocol {lowest} at the lowest, and this "
            f"Dynadesk {__version__} speaks protocol {ours} at most: upgrade this desk to sync with that server.")


# -- shaping ---------------------------------------------------------------------------------------------------


def kind_since(kind: str) -> int:
    return wire_versions.RECORD_SINCE.get(kind, FIRST_PROTOCOL)


def newer_fields(kind: str, protocol: int) -> list[str]:
    """The fields of ``kind`` (a record kind or a response class's name) newer than ``protocol``."""
    return [name for (of, name), since in wire_versions.FIELD_SINCE.items() if of == kind and since > protocol]


RECORD_CLASSES: dict[str, type[BaseModel]] = {
    "person": wire.PersonRecord, "task": wire.TaskRecord, "model": wire.ModelRecordWire, "round": wire.RoundRecord,
    "context": wire.ContextRecord, "example": wire.ExampleRecord, "validation": wire.ValidationRecord,
    "example_review": wire.ExampleReviewRecord, "task_setting": wire.TaskSettingRecord}


def _is_default(model: type[BaseModel] | None, name: str, value: Any) -> bool:
    """Whether ``value`` (in JSON form) is what the field is when left out: leaving it out loses nothing.
    A field the schema does not know counts as its empty value."""
    info = model.model_fields.get(name) if model is not None else None
    if info is None or info.is_required():
        return value in (None, "", [], {}, 0, False)
    return to_jsonable_python(info.get_default(call_default_factory=True)) == to_jsonable_python(value)


@dataclass
class Shaped:
    """A record in an older protocol's shape: ``record`` is None when its kind is newer (left out);
    ``lost`` names the newer fields left out that carried something."""

    record: dict | None
    lost: list[str] = field(default_factory=list)

    @property
    def held_back(self) -> bool:
        return self.record is None or bool(self.lost)


def shape_record(record: dict, protocol: int) -> Shaped:
    """``record`` (wire JSON, tagged by ``record``) as a side that speaks ``protocol`` takes it."""
    kind = str(record.get("record"))
    if kind_since(kind) > protocol:
        return Shaped(None)
    newer = [name for name in newer_fields(kind, protocol) if name in record]
    if not newer:
        return Shaped(record)
    model = RECORD_CLASSES.get(kind)
    lost = [name for name in newer if not _is_default(model, name, record[name])]
    return Shaped({k: v for k, v in record.items() if k not in newer}, lost)


@dataclass
class Tally:
    """What shaping an answer held back, by record id: left out whole, or sent without newer fields."""

    left_out: dict[str, str] = field(default_factory=dict)  # id -> kind
    partly: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.left_out) + len(self.partly)


def shape_answer(value: BaseModel, protocol: int, tally: Tally | None = None) -> Any:
    """A response model as JSON in ``protocol``'s shape: records of newer kinds left out of its lists, newer
    fields (of records by their kind, of other models by their class's name) left out everywhere."""
    return _shape(value, value.model_dump(mode="json"), protocol, tally if tally is not None else Tally())


def _shape(value: Any, data: Any, protocol: int, tally: Tally) -> Any:
    if isinstance(value, BaseModel) and isinstance(data, dict):
        kind = getattr(value, "record", None)
        name = kind if isinstance(kind, str) and "record" in type(value).model_fields else type(value).__name__
        newer = set(newer_fields(name, protocol))
        out = {}
        for key, item in data.items():
            if key in newer:
                if name == kind and not _is_default(type(value), key, item):  # a record's, not an answer's
                    tally.partly.setdefault(str(data.get("id")), name)
                continue
            out[key] = _shape(getattr(value, key, None), item, protocol, tally)
        return out
    if isinstance(value, (list, tuple)) and isinstance(data, list):
        out_list = []
        for member, item in zip(value, data):
            kind = getattr(member, "record", None) if isinstance(member, BaseModel) else None
            if isinstance(kind, str) and kind_since(kind) > protocol:
                tally.left_out[str(item.get("id"))] = kind
                continue
            out_list.append(_shape(member, item, protocol, tally))
        return out_list
    if isinstance(value, dict) and isinstance(data, dict):
        return {key: _shape(value.get(key), item, protocol, tally) for key, item in data.items()}
    return data
