"""Run the benchmarks: ``python -m bench [--quick] [--only NAME ...]``.

Prints one table and writes bench/results/bench-<time>.json (and latest.json).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench.common import BenchContext, Result  # noqa: E402

HERE = Path(__file__).resolve().parent


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", nargs="*", default=None, help="module names, e.g. storage models")
    args = parser.parse_args(argv)
    modules = sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))
    if args.only:
        modules = [m for m in modules if m in args.only]
    results: list[Result] = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="dynadesk-bench-") as scratch:
        for name in modules:
            print(f"== {name}", file=sys.stderr, flush=True)
            work = Path(scratch) / name
            work.mkdir()
            module = importlib.import_module(f"bench.bench_{name}")
            results.extend(module.run(BenchContext(work_dir=work, quick=args.quick)))
    header = ["group", "benchmark", "median", "p95", "unit", "n", "budget", "ok", "notes"]
    rows = [[r.group, r.name, _fmt(r.median), _fmt(r.p95), r.unit, str(r.n), r.budget,
             {True: "yes", False: "NO", None: ""}[r.within_budget], r.notes] for r in results]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    payload = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "quick": args.quick,
        "results": [r.to_json() for r in results],
    }
    path = out_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    text = json.dumps(payload, indent=2)
    path.write_text(text)
    (out_dir / "latest.json").write_text(text)
    print(f"\nWrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
