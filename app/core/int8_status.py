"""What a model record's provenance says about its int8 form, in words for lists and About.

    int8_status(record.provenance)   # "int8 passed: 99.86% same label, p99 0.046 · 4,957 texts", or why not
    int8_detail(record.provenance)   # the whole line, with the maximum and the texts' source
    default_model_int8()             # the figures shipped with the bundled model's recipe

The figures come from ``local_models.parity`` (stored under ``export.parity`` by the export);
a float export that serves because int8 was refused carries the reason in ``notes``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def summary_line(parity: Mapping[str, Any]) -> str:
    """One line from a stored verdict (``local_models.parity.ParityVerdict.to_json``). Kept free of
    ``local_models`` imports: widgets' view-models show it."""
    try:
        texts, agreement = int(parity["texts"]), float(parity["agreement"])
        p99, worst = float(parity["p99_change"]), float(parity["max_change"])
    except (KeyError, TypeError, ValueError):
        return "int8 parity: not measured" + (f" ({'; '.join(map(str, parity.get('problems') or []))})"
                                              if parity.get("problems") else "")
    if any(math.isnan(v) for v in (agreement, p99, worst)):
        return "int8 parity: not measured"
    state = ("passed" if parity.get("passed") else
             "FAILED, kept with --force" if parity.get("forced") else "failed")
    return (f"int8 parity {state}: same label on {agreement:.2%} of {texts:,} texts, "
            f"probability change p99 {p99:.3f}, max {worst:.3f}")


def _parity(provenance: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The int8 form's verdict: of this export, else of the recipe a trained part was registered with."""
    for key in ("export", "int8_check"):
        holder = (provenance or {}).get(key)
        parity = holder.get("parity") if isinstance(holder, Mapping) else None
        if isinstance(parity, Mapping):
            return parity
    return None


def _refusal(provenance: Mapping[str, Any] | None) -> str | None:
    notes = (provenance or {}).get("notes") or []
    found = [str(n) for n in notes if "int8" in str(n).lower()] if isinstance(notes, list) else []
    check = (provenance or {}).get("int8_check")
    if isinstance(check, Mapping) and check.get("reason"):
        found.append(str(check["reason"]))
    return found[0] if found else None


def int8_status(provenance: Mapping[str, Any] | None) -> str:
    """A short cell: the int8 check's outcome, or why the model serves in fp32; "" when neither applies."""
    parity = _parity(provenance)
    if parity is not None:
        try:
            agreement, p99, texts = float(parity["agreement"]), float(parity["p99_change"]), int(parity["texts"])
        except (KeyError, TypeError, ValueError):
            return "int8, not checked"
        mark = "passed" if parity.get("passed") else ("FORCED" if parity.get("forced") else "failed")
        return f"int8 {mark}: {agreement:.2%} same label, p99 {p99:.3f} · {texts:,} texts"
    refusal = _refusal(provenance)
    return "no int8 form" if refusal else ""


def int8_detail(provenance: Mapping[str, Any] | None) -> str:
    """The long form, for tooltips and About."""
    parity = _parity(provenance)
    if parity is not None:
        line = summary_line(parity)
        source = parity.get("source")
        problems = parity.get("problems") or []
        extra = f" on {source}" if source else ""
        why = f" ({'; '.join(map(str, problems))})" if problems and not parity.get("passed") else ""
        return f"{line}{extra}{why}{_rebuilt(parity)}"
    return _refusal(provenance) or ""


def _rebuilt(parity: Mapping[str, Any]) -> str:
    """How a graph rebuilt from its recipe with other bytes was known to be the checked one, when it was."""
    verification = parity.get("verification")
    check = verification.get("check") if isinstance(verification, Mapping) else None
    if not isinstance(verification, Mapping) or verification.get("by") != "answers" or not isinstance(check, Mapping):
        return ""
    try:
        return (f"; rebuilt here with other bytes, taken by its answers on {int(check['texts'])} check texts "
                f"(within {float(check['max_change']):.1e})")
    except (KeyError, TypeError, ValueError):
        return ""


def default_model_int8() -> str:
    """The bundled model's int8 recipe and its recorded figures, from the file shipped with it."""
    import resources

    path = resources.ROOT / "models" / "hate_speech_r1" / "int8_recipe.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no int8 recipe shipped (the desk runs fp32)"
    parity = document.get("parity") if isinstance(document, dict) else None
    if not isinstance(parity, dict) or not document.get("recipe"):
        return f"int8 not used: {document.get('reason') or 'no recipe passed'}" if isinstance(document, dict) else ""
    return f"{document.get('recipe_name') or 'int8'}; {int8_detail({'export': {'parity': parity}})}"


def form_latency(provenance: Mapping[str, Any] | None) -> str:
    """The form's latency as measured when it was built (``export.latency``): "p50 2.61 ms, p95 4.02 ms";
    "" when none was stored (PyTorch folders, exports made before it was measured)."""
    export = (provenance or {}).get("export")
    latency = export.get("latency") if isinstance(export, Mapping) else None
    try:
        median, p95 = float(latency["median_ms"]), float(latency["p95_ms"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return ""
    return f"p50 {median:.2f} ms, p95 {p95:.2f} ms"
