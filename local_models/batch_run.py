"""Batched prediction over many inputs, with what an evaluation reports about the run itself.

    run = BatchRun(engine_or_ensemble)
    predictions, stats = run.run(texts, progress=Progress())
    stats.items_per_second, stats.latency_p95_ms, stats.peak_rss_mb

Inputs are ordered by token count (tokenised once, in one batch call) so that a batch pads
little; results come back in the caller's order. Batches are dynamic: at most ``batch_size``
inputs, and at most ``max_batch_tokens`` padded tokens, so short texts go in large batches and
long ones in small. Single-case latency is timed separately on a
seeded sample of the inputs, one at a time, as a user typing would see it. Peak memory is the
process's resident set size sampled on a thread during the run (the model's native buffers do
not show up in tracemalloc).
"""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from local_models.progress import Progress
from local_models.tokenization import ModelInput

# Measured with the int8 default model on a HateCheck-size suite, one thread, 2 busy cores
# (bench_evaluation, "batched prediction" rows): 32 texts per batch was fastest of 16-128, larger
# batches lost 10-30 % (their activations leave the caches); a 512-token bound on the padded
# batch keeps long texts in small batches and cost nothing on short ones.
DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_BATCH_TOKENS = 512


@dataclass(frozen=True)
class BatchStats:
    items: int
    seconds: float  # the batched run alone (latency sampling excluded)
    items_per_second: float
    batch_size: int
    latency_samples: int
    latency_p50_ms: float | None  # one input per call
    latency_p95_ms: float | None
    peak_rss_mb: float | None  # the process's peak resident memory during the run
    rss_increase_mb: float | None  # peak minus the resident memory when the run began

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class BatchRun:
    """Runs an ``InferenceEngine`` or an ``Ensemble`` (anything with ``predict(list)``) over many inputs."""

    def __init__(self, predictor: Any, *, batch_size: int = DEFAULT_BATCH_SIZE, latency_samples: int = 50,
                 seed: int = 0, max_batch_tokens: int | None = DEFAULT_MAX_BATCH_TOKENS):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if max_batch_tokens is not None and max_batch_tokens < 1:
            raise ValueError("max_batch_tokens must be at least 1")
        self.predictor = predictor
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.latency_samples = latency_samples
        self.seed = seed

    def order(self, inputs: Sequence[ModelInput]) -> list[int]:
        """Input indices by token count (then by position): batches of equal lengths pad nothing."""
        return self._ordered(inputs)[0]

    def _ordered(self, inputs: Sequence[ModelInput]) -> tuple[list[int], list[int]]:
        """(input indices by length, the length of each input): tokens, or characters / 4 when
        the predictor has no tokenizer to count with."""
        encoder = _encoder_of(self.predictor)
        if encoder is None:
            lengths = [_char_length(x) // 4 + 1 for x in inputs]
        else:
            firsts = [x if isinstance(x, str) else x[0] + " " + x[1] for x in inputs]
            lengths = [len(e.ids) for e in encoder._tokenizer.encode_batch(firsts, add_special_tokens=False)]
        return sorted(range(len(inputs)), key=lambda i: lengths[i]), lengths

    def batches(self, order: Sequence[int], lengths: Sequence[int]) -> list[list[int]]:
        """Consecutive runs of ``order`` (ascending lengths): each at most ``batch_size`` inputs
        and, padded to its longest, at most ``max_batch_tokens`` tokens (one input at least)."""
        out: list[list[int]] = []
        current: list[int] = []
        for i in order:
            too_many = len(current) >= self.batch_size
            too_long = (self.max_batch_tokens is not None and current
                        and (len(current) + 1) * lengths[i] > self.max_batch_tokens)
            if too_many or too_long:
                out.append(current)
                current = []
            current.append(i)
        if current:
            out.append(current)
        return out

    def run(self, inputs: Sequence[ModelInput], progress: Progress | None = None) -> tuple[list[Any], BatchStats]:
        progress = progress or Progress()
        total = len(inputs)
        results: list[Any] = [None] * total
        progress.report(0, total)
        sampler = _RssSampler()
        sampler.start()
        # only the model's own work is timed: a progress report may serve the user's typing first
        started = time.perf_counter()
        try:
            batches = self.batches(*self._ordered(inputs)) if inputs else []
            seconds = time.perf_counter() - started
            done = 0
            for chunk in batches:
                progress.check()
                started = time.perf_counter()
                predictions = self.predictor.predict([inputs[i] for i in chunk])
                seconds += time.perf_counter() - started
                for i, prediction in zip(chunk, predictions):
                    results[i] = prediction
                done += len(chunk)
                progress.report(done, total)
        finally:
            sampler.stop()
        latencies = self.sample_latency(inputs, progress)
        return results, BatchStats(
            items=total, seconds=seconds, items_per_second=total / seconds if seconds > 0 else 0.0,
            batch_size=self.batch_size, latency_samples=len(latencies),
            latency_p50_ms=statistics.median(latencies) if latencies else None,
            latency_p95_ms=percentile(latencies, 0.95) if latencies else None,
            peak_rss_mb=sampler.peak_mb, rss_increase_mb=sampler.increase_mb,
        )

    def sample_latency(self, inputs: Sequence[ModelInput], progress: Progress | None = None) -> list[float]:
        """Milliseconds per single-input call, on a seeded sample (after one untimed warm-up call)."""
        if not inputs or self.latency_samples <= 0:
            return []
        rng = random.Random(self.seed)
        picked = rng.sample(range(len(inputs)), min(self.latency_samples, len(inputs)))
        self.predictor.predict([inputs[picked[0]]])
        samples = []
        for i in picked:
            if progress is not None:
                progress.check()
            start = time.perf_counter()
            self.predictor.predict([inputs[i]])
            samples.append((time.perf_counter() - start) * 1000)
        return samples


def batch_threads() -> int:
    """Threads for batch work such as an evaluation: every core when the machine is idle, else the
    desk's default. Measured on 2 cores (bench_evaluation): a second thread took a HateCheck-size
    suite from 17.6 s to 10.4 s on a quiet machine, but made it up to 3x slower when other
    programs kept the cores busy (onnxruntime's threads spin while they wait)."""
    from local_models.engine import default_num_threads

    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return default_num_threads()
    return cores if load < 0.5 * cores else default_num_threads()


def percentile(samples: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(samples)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _encoder_of(predictor: Any) -> Any:
    encoder = getattr(predictor, "encoder", None)
    if encoder is None and getattr(predictor, "engines", None):
        encoder = predictor.engines[0].encoder
    return encoder if encoder is not None and hasattr(encoder, "_tokenizer") else None


def _char_length(item: ModelInput) -> int:
    return len(item) if isinstance(item, str) else len(item[0]) + len(item[1])


def current_rss_mb() -> float | None:
    """Resident memory of this process now (Linux /proc), or None where that cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class _RssSampler:
    """Samples resident memory every 10 ms on a daemon thread; falls back to getrusage's peak."""

    def __init__(self, interval_s: float = 0.01):
        self.interval_s = interval_s
        self.start_mb = current_rss_mb()
        self.peak_mb: float | None = self.start_mb
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def start(self) -> None:
        if self.start_mb is not None:
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        now = current_rss_mb()
        if now is not None and (self.peak_mb is None or now > self.peak_mb):
            self.peak_mb = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.start_mb is None:
            try:
                import resource

                self.peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
            except (ImportError, OSError):
                self.peak_mb = None
        else:
            self._sample()

    @property
    def increase_mb(self) -> float | None:
        if self.peak_mb is None or self.start_mb is None:
            return None
        return self.peak_mb - self.start_mb
