"""Dynadesk's own JSON documents (evaluations, comparison reports, training manifests): written whole or not at
all, and read back only when their ``format`` says they are the kind asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.core.errors import DynadeskError


def write_document(doc: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a document
    return path


def read_document(path: str | Path, kind: str, what: str, *, hint: str = "",
                  error: type[DynadeskError] = DynadeskError) -> dict[str, Any]:
    """The document at ``path`` whose ``format`` is ``kind``; ``what`` names it in messages ("a training
    manifest"), ``hint`` says what to pass instead. Anything else raises ``error``."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise error(f"{path} cannot be read as {what} ({exc}).{hint}") from exc
    except RecursionError:
        raise error(f"{path} cannot be read as {what} (it is nested too deep).{hint}") from None
    if not isinstance(doc, dict) or doc.get("format") != kind:
        raise error(f"{path} is not {what}.{hint}")
    return doc
