"""The one reader of text files with rows (CSV and JSON lines), where every bad row becomes
"line N: what is wrong".

Importers, evaluation readers, context imports and the training data reader share these
(``read_text`` for the file, ``csv_table`` and ``json_lines`` for its rows), so that no row of a
hostile file surfaces as a Python exception: the caller decides whether a bad row stops the work
or is skipped.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.core.errors import DynadeskError, ImportProblem

INT64 = 2**63  # what SQLite and PostgreSQL store in an integer column
MAX_FILE_BYTES = 2 * 1024**3


def read_text(path: Path, what: str = "file", max_bytes: int = MAX_FILE_BYTES) -> str:
    """A whole UTF-8 text file (a BOM is dropped); every way it can fail is a message naming ``what``."""
    path = Path(path)
    if not path.exists():
        raise DynadeskError(f"There is no {what} at {path}.")
    if path.is_dir():
        raise DynadeskError(f"{path} is a folder, not a {what}.")
    try:
        size = path.stat().st_size
        raw = path.read_bytes() if size <= max_bytes else b""
    except OSError as exc:
        raise DynadeskError(f"{path} cannot be read: {exc.strerror or exc}.") from exc
    if size > max_bytes:
        raise DynadeskError(f"{path} is {size / 2**20:,.0f} MB; Dynadesk reads a {what} of up to "
                            f"{max_bytes // 2**20:,} MB. Split it.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DynadeskError(f"{path}, line {line}: the {what} is not UTF-8 text ({exc.reason}).") from exc


def json_lines(text: str) -> Iterator[tuple[int, Any | ImportProblem]]:
    """(line, value) for each non-blank line of a JSON-lines text, or (line, problem) for a line
    that ``json_line`` refuses."""
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield line, json_line(raw)
        except ValueError as exc:
            yield line, ImportProblem(line, str(exc))


def csv_table(text: str) -> tuple[list[str], Iterator[tuple[int, dict[str, str] | ImportProblem]]]:
    """The header, and (first line of the row, row) or (line, problem) for each row.

    Strict quoting: a quote left open or text after a closing quote is a bad row, instead of
    silently swallowing the following lines into one field. A row with fewer or more fields
    than the header is a bad row. Blank lines are skipped.
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return [], iter(())
    except csv.Error as exc:
        header = []
        problem = ImportProblem(1, f"the header cannot be read: {_csv_reason(str(exc), 1, reader.line_num)}")
        return header, iter([(1, problem)])
    return header, _csv_body(reader, header)


def _csv_body(reader, header: list[str]) -> Iterator[tuple[int, dict[str, str] | ImportProblem]]:
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, ImportProblem(start, _csv_reason(str(exc), start, reader.line_num))
            continue
        if not fields:
            continue
        if len(fields) != len(header):
            more_or_fewer = "more" if len(fields) > len(header) else "fewer"
            yield start, ImportProblem(start, f"the row has {len(fields)} field(s), {more_or_fewer} than the "
                                              f"header's {len(header)}")
            continue
        yield start, dict(zip(header, fields))


def _csv_reason(message: str, start: int, end: int) -> str:
    until = f" (the row runs on to line {end})" if end > start else ""
    if message == "unexpected end of data":
        return "a quoted field opens in this row and is never closed"
    if message.startswith("',' expected after '\"'"):
        return (f"a closing quote is followed by more text{until}; a quote inside a quoted field "
                "must be doubled (\"\")")
    if message.startswith("field larger than field limit"):
        return f"a field is longer than {csv.field_size_limit():,} characters{until}; is a quote left open?"
    return f"the row cannot be read as CSV ({message}){until}"


def json_line(raw: str) -> Any:
    """One JSON value; raises ValueError with a reason fit for "line N: ..." for anything
    Dynadesk could not store: bad JSON, nesting too deep to read, NaN or Infinity, and numbers
    beyond what a database column holds."""
    try:
        return json.loads(raw, parse_constant=_no_constant, parse_float=finite_float, parse_int=_int64)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("nested too deep") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def finite_float(text: str) -> float:
    """A JSON number as a float; a ValueError for one too large to be finite (1e999), which JSON cannot carry back."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _int64(text: str) -> int:
    if len(text.lstrip("-")) > 19 or not -INT64 <= int(text) < INT64:
        raise ValueError(f"the number {text[:40]}{'...' if len(text) > 40 else ''} is too large")
    return int(text)


def whole_number(value: Any, what: str, *, low: int = 0, high: int = INT64 - 1) -> int:
    """``value`` (an int, or text such as "3" or "3.0") as an int in [low, high]; otherwise a
    ValueError that names ``what`` and the value."""
    shown = str(value)[:40]
    number = _as_whole(value)
    if number is None:
        raise ValueError(f"{what} '{shown}' is not a whole number")
    if not low <= number <= high:
        raise ValueError(f"{what} {shown} is out of range ({low:,} to {high:,})")
    return number


def _as_whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if len(text) > 40:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number == int(number) else None
