"""What a training run's arithmetic depends on beyond its data and options: the CPU and its vector
instructions, the torch build and the thread count.

The same recipe gives the same bits only where all of these match: the matrix products round with the
kernels the CPU's instructions select (AVX2, AVX-512, AMX) and with how the work is split between threads.
A manifest records ``describe``; ``changes`` says what differs between two descriptions, so a reproduction on
another machine can say why its bits differ instead of differing silently.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
# the instruction-set flags that pick floating-point kernels (the rest of /proc/cpuinfo's flags do not)
_ISA = re.compile(r"^(avx2|avx512\w*|amx\w*|avx_vnni\w*|fma)$")
# the fields that must all match for a run to promise the same bits
SAME_BITS_FIELDS = ("cpu", "isa", "torch_cpu_capability", "torch", "transformers", "threads", "platform")


def cpu_info(text: str | None = None) -> tuple[str, list[str]]:
    """The CPU's model name and its kernel-choosing instruction flags, from /proc/cpuinfo (``text``: its
    contents); elsewhere the platform's processor name and no flags."""
    if text is None:
        try:
            text = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
    model, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = {flag for flag in value.split() if _ISA.match(flag)}
    return model or platform.processor() or platform.machine() or "unknown", sorted(flags)


def describe(num_threads: int) -> dict[str, Any]:
    """This machine as a training run sees it (recorded in the trained part's description and the manifest)."""
    import torch
    import transformers

    model, flags = cpu_info()
    return {"cpu": model, "isa": flags, "torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
            "torch": torch.__version__, "transformers": transformers.__version__, "threads": int(num_threads),
            "platform": platform.machine()}


def changes(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """What differs between a recorded machine and this one, in words (empty: the same bits are promised).
    A record without a machine (made before it was recorded) is one difference: nothing can be promised."""
    if not recorded:
        return ["the manifest does not record the machine it was made on"]
    out = []
    for key in SAME_BITS_FIELDS:
        before, now = recorded.get(key), current.get(key)
        if before == now:
            continue
        if key == "isa":
            gone, added = sorted(set(before or []) - set(now or [])), sorted(set(now or []) - set(before or []))
            parts = ([f"without {', '.join(gone)}"] if gone else []) + ([f"with {', '.join(added)}"] if added else [])
            out.append("instructions: " + "; ".join(parts) + " here")
        else:
            label = {"cpu": "CPU", "torch_cpu_capability": "torch kernels", "torch": "torch",
                     "transformers": "transformers", "threads": "threads", "platform": "platform"}[key]
            out.append(f"{label}: {before} recorded, {now} here")
    return out


def summary(described: Mapping[str, Any] | None) -> str:
    """One line: 'AMD EPYC 7B13 (avx2, fma; torch 2.13.0 AVX2, 2 threads)'."""
    if not described:
        return "an unrecorded machine"
    flags = ", ".join(described.get("isa") or []) or "no vector flags read"
    return (f"{described.get('cpu')} ({flags}; torch {described.get('torch')} "
            f"{described.get('torch_cpu_capability')}, {described.get('threads')} threads)")
