"""Timing helpers shared by the benchmarks. Report medians and p95s, and ratios measured side
by side in the same run; never assert on time."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Result:
    group: str
    name: str
    unit: str  # "ms", "s", "items/s", "ratio", ...
    median: float | None = None
    p95: float | None = None
    n: int = 0
    budget: str = ""  # e.g. "p95 <= 100 ms"
    within_budget: bool | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class BenchContext:
    work_dir: Path  # scratch folder for this run
    quick: bool = False  # smaller sizes, for a smoke run


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def time_calls(fn: Callable[[], object], n: int, warmup: int = 3) -> list[float]:
    """Milliseconds per call, ``n`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    gc.collect()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def summarise(group: str, name: str, samples_ms: list[float], *, budget_p95_ms: float | None = None,
              notes: str = "", unit: str = "ms") -> Result:
    p95 = percentile(samples_ms, 0.95)
    return Result(
        group=group, name=name, unit=unit, median=statistics.median(samples_ms), p95=p95, n=len(samples_ms),
        budget=f"p95 <= {budget_p95_ms:g} {unit}" if budget_p95_ms is not None else "",
        within_budget=None if budget_p95_ms is None else p95 <= budget_p95_ms, notes=notes,
    )
