"""Which words drove a prediction: one signed, normalised score per word of the exact text.

Two methods, registered like back-ends and chosen by capability:
- ``gradients``: layer integrated gradients (as Captum's ``LayerIntegratedGradients``) on the
  input embedding layer, from a baseline that keeps the special tokens and puts padding in
  between; the interpolation steps run as one batch, and the convergence delta is reported.
  Needs ``supports_gradients``.
- ``ablation``: remove (or mask) each word in turn; every variant and the original go through
  the model in one batched forward pass. Works with any model, ONNX included.

Both return an ``Attribution``: a score per word with its character span, positive when the
word pushes towards the target label and negative when it pushes away, divided by the largest
magnitude so that the strongest word scores +1 or -1. The raw scores (probability units)
stay alongside, with ``scale``: what a view shows at full colour, so that a text whose
strongest word moves the model by 0.017 does not look as decisive as one moved by 0.9.
"""

from __future__ import annotations

import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from local_models.errors import UnsupportedOperation
from local_models.heads import ClassificationHead
from local_models.tokenization import EncodedBatch, ModelInput
from local_models.words import WordUnit, group_tokens

if TYPE_CHECKING:
    from local_models.backends.hf_torch import TorchRuntime
    from local_models.engine import InferenceEngine

# What a method gives: (raw score per unit, label probabilities of the original input, target index, details).
Outcome = tuple[np.ndarray, np.ndarray, int, dict[str, Any]]

# Chosen by measurement (bench_models, "LIG settings" rows; the default model, texts of 8-32
# tokens, one thread): the midpoint rule converges far faster than Gauss-Legendre on this
# integrand (median delta 0.009 vs 0.072 at 8 steps; 0.001 at 16), and 16 steps in bfloat16 on
# a CPU with AMX cost what 8 steps cost in float32. All steps go through one forward and backward
# pass: each further pass cost 15-20 ms, more than the steps themselves.
DEFAULT_IG_STEPS = 16
DEFAULT_IG_OUTPUT = "probability"
DEFAULT_IG_INTEGRATION = "riemann_middle"
DEFAULT_IG_STEPS_PER_PASS: int | None = None  # None: all steps in one forward and backward pass
DEFAULT_IG_PRECISION = "auto"  # bfloat16 where the CPU multiplies it natively (AMX), else float32
MAX_ABLATION_ROWS = 64  # variants per forward pass; longer texts take several passes
# Full colour needs at least this change in the target's probability; above it, the strongest word.
MIN_FULL_SCALE = 0.2


def full_colour_scale(raw_scores: Sequence[float]) -> float:
    """The magnitude (raw units) a heatmap shows at full colour: the strongest word, but never
    less than MIN_FULL_SCALE, so that small effects stay pale instead of being blown up to ±1."""
    return max([MIN_FULL_SCALE, *(abs(float(r)) for r in raw_scores)])


@dataclass(frozen=True)
class WordScore:
    segment: int  # which text of a pair the word is in
    text: str
    start: int
    end: int
    score: float  # signed and normalised: the strongest word is +1 or -1
    raw: float  # the method's own units (change in the target label's probability)
    seen: bool  # False when the model never read the word (truncated, or invisible characters)


@dataclass(frozen=True)
class Attribution:
    words: tuple[WordScore, ...]
    target: str
    predicted: str
    target_probability: float
    method: str
    latency_ms: float
    model_sha: str
    truncated: bool
    convergence_delta: float | None = None  # integrated gradients: sum of attributions minus F(x) - F(baseline)
    n_steps: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def scale(self) -> float:
        """Full colour in a heatmap (raw units); see ``full_colour_scale``."""
        return full_colour_scale([w.raw for w in self.words])

    @property
    def units(self) -> str:
        """What the raw scores measure: the target label's probability, or its logarithm."""
        return "log probability" if self.details.get("output") == "log_probability" else "probability"

    def top(self, n: int = 5) -> list[WordScore]:
        return sorted(self.words, key=lambda w: -abs(w.score))[:n]


def _nothing() -> None:
    return None


@dataclass
class _Problem:
    """What every method gets: the encoded input, its word units and the target's column
    (None: the predicted label, which the method finds with its own first forward pass)."""

    engine: InferenceEngine
    batch: EncodedBatch
    units: list[WordUnit]
    target_index: int | None
    checkpoint: Callable[[], None] = _nothing  # called between passes: may serve other work, or raise Cancelled


class AttributionMethod(ABC):
    name: ClassVar[str]
    requires_gradients: ClassVar[bool]
    preference: ClassVar[int]  # "auto" picks the most preferred method the model supports

    @classmethod
    def applicable(cls, engine: InferenceEngine) -> bool:
        return engine.supports_gradients or not cls.requires_gradients

    @abstractmethod
    def run(self, problem: _Problem, **options: Any) -> Outcome:
        """(raw score per unit, label probabilities of the original input, target index, details)."""


METHODS: dict[str, type[AttributionMethod]] = {}


def register_method(cls: type[AttributionMethod]) -> type[AttributionMethod]:
    METHODS[cls.name] = cls
    return cls


@register_method
class IntegratedGradients(AttributionMethod):
    """Layer integrated gradients on the input embedding layer, computed here rather than by
    Captum: the interpolation steps run in chunks, so that ``checkpoint`` can be called between
    them (the GUI answers a waiting keystroke there), and the convergence delta's two end points
    come from the forward pass that finds the target, not from two more passes."""

    name = "gradients"
    requires_gradients = True
    preference = 2

    def run(self, problem: _Problem, *, n_steps: int = DEFAULT_IG_STEPS, output: str = DEFAULT_IG_OUTPUT,
            integration: str = DEFAULT_IG_INTEGRATION, steps_per_pass: int | None = DEFAULT_IG_STEPS_PER_PASS,
            precision: str = DEFAULT_IG_PRECISION, **options: Any) -> Outcome:
        import torch

        if options:
            raise TypeError(f"unknown option(s) for gradients: {', '.join(options)}")
        if n_steps < 1:
            raise ValueError("n_steps must be at least 1")
        if output not in ("probability", "log_probability"):
            raise ValueError("output is 'probability' or 'log_probability'")
        alphas, weights = integration_points(integration, n_steps)
        per_pass = n_steps if not steps_per_pass else max(1, int(steps_per_pass))
        runtime = cast("TorchRuntime", problem.engine.runtime)  # applicable() admits only gradient back-ends
        head = cast(ClassificationHead, problem.engine.head)
        module = runtime.module
        precision = gradient_precision(module.device.type) if precision == "auto" else precision
        if precision not in ("float32", "bfloat16"):
            raise ValueError("precision is 'auto', 'float32' or 'bfloat16'")
        columns = torch.tensor(head._columns, dtype=torch.float32, device=module.device)
        feeds = runtime.feeds(problem.batch)
        input_ids = feeds.pop("input_ids")
        baseline = input_ids.clone()
        ordinary = torch.tensor([o is not None for o in problem.batch.offsets[0]], device=input_ids.device)
        baseline[0, ordinary] = problem.engine.encoder.pad_token_id
        layer = runtime.embedding_layer()

        def explained(probabilities: torch.Tensor) -> torch.Tensor:
            return probabilities if output == "probability" else torch.log(probabilities.clamp_min(1e-12))

        def label_probabilities(ids: torch.Tensor, rows: int) -> torch.Tensor:
            extra = {name: value.expand(rows, -1) for name, value in feeds.items()}
            with torch.autocast(module.device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
                logits = module(input_ids=ids, **extra).logits
            return torch.softmax(logits.float(), dim=-1) @ columns

        # the input and the baseline in one pass: the prediction, and both ends of the path
        with torch.inference_mode():
            ends = label_probabilities(torch.cat([input_ids, baseline]), 2)
            embedded = layer(torch.cat([input_ids, baseline]))
        probabilities = ends[0].cpu().numpy()
        target = int(probabilities.argmax()) if problem.target_index is None else problem.target_index
        start, difference = embedded[1:2].clone(), (embedded[0:1] - embedded[1:2]).clone()
        total = torch.zeros_like(difference[0])
        override = _embedding_override(layer)
        try:
            for first in range(0, n_steps, per_pass):
                if first:
                    problem.checkpoint()
                chunk_alphas = torch.tensor(alphas[first:first + per_pass], dtype=start.dtype, device=start.device)
                chunk_weights = torch.tensor(weights[first:first + per_pass], dtype=start.dtype, device=start.device)
                rows = len(chunk_alphas)
                with torch.enable_grad():
                    points = (start + chunk_alphas[:, None, None] * difference).requires_grad_(True)
                    override.points = points
                    scores = explained(label_probabilities(input_ids.expand(rows, -1), rows))[:, target]
                    (gradients,) = torch.autograd.grad(scores.sum(), points)
                total += (gradients.float() * chunk_weights[:, None, None]).sum(dim=0)
        finally:
            override.points = None
        per_token = (total * difference[0]).sum(dim=-1).detach().float().cpu().numpy()
        explained_ends = explained(ends[:, target]).cpu().numpy()
        delta = abs(float(per_token.sum()) - float(explained_ends[0] - explained_ends[1]))
        raw = np.array([per_token[list(u.token_positions)].sum() if u.seen else 0.0 for u in problem.units])
        return raw, probabilities, target, {"convergence_delta": delta, "n_steps": n_steps, "output": output,
                                            "integration": integration, "precision": precision}


def gradient_precision(device_type: str) -> str:
    """bfloat16 on a CPU with AMX tiles (measured: 16 steps 1.5x faster than float32, the same
    convergence delta); float32 everywhere else, where bfloat16 is emulated and slower."""
    if device_type != "cpu":
        return "float32"
    import torch

    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return "bfloat16" if amx is not None and amx() else "float32"


_OVERRIDES: weakref.WeakKeyDictionary[Any, threading.local] = weakref.WeakKeyDictionary()
_OVERRIDES_LOCK = threading.Lock()


def _embedding_override(layer: Any) -> threading.local:
    """A per-thread replacement for ``layer``'s output: set ``.points`` and the layer answers
    with them on this thread only. The hook is installed once and stays, so that a prediction
    on another thread (the GUI's prediction lane) runs the same module untouched meanwhile."""
    with _OVERRIDES_LOCK:
        override = _OVERRIDES.get(layer)
        if override is None:
            override = threading.local()
            _OVERRIDES[layer] = override

            def replace(_module: Any, _inputs: Any, _output: Any, override: threading.local = override) -> Any:
                return getattr(override, "points", None)  # None keeps the layer's own output

            layer.register_forward_hook(replace)
    return override


def integration_points(integration: str, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Where on the path from the baseline (0) to the input (1) gradients are taken, and their
    weights (which sum to 1), by the quadrature rule ``integration``."""
    if integration == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n_steps)
        return 0.5 * (nodes + 1), 0.5 * weights
    if integration == "riemann_middle":
        return (np.arange(n_steps) + 0.5) / n_steps, np.full(n_steps, 1.0 / n_steps)
    if integration == "riemann_trapezoid":
        if n_steps < 2:
            raise ValueError("the trapezoid rule needs at least 2 steps")
        weights = np.full(n_steps, 1.0 / (n_steps - 1))
        weights[[0, -1]] /= 2
        return np.linspace(0.0, 1.0, n_steps), weights
    raise ValueError(f"unknown integration {integration!r}; use {', '.join(INTEGRATIONS)}")


INTEGRATIONS = ("gausslegendre", "riemann_middle", "riemann_trapezoid")


@register_method
class WordAblation(AttributionMethod):
    name = "ablation"
    requires_gradients = False
    preference = 1

    def run(self, problem: _Problem, *, mode: str = "remove", rows_per_pass: int = MAX_ABLATION_ROWS,
            **options: Any) -> Outcome:
        if options:
            raise TypeError(f"unknown option(s) for ablation: {', '.join(options)}")
        if mode not in ("remove", "mask"):
            raise ValueError("ablation mode is 'remove' or 'mask'")
        engine, batch = problem.engine, problem.batch
        mask_id = engine.encoder.mask_token_id
        if mode == "mask" and mask_id is None:
            raise UnsupportedOperation(f"The tokenizer of {engine.name} has no mask token; ablate with mode='remove'.")
        seen = [k for k, u in enumerate(problem.units) if u.seen]
        rows = [self._variant(batch, problem.units[k].token_positions, mode, mask_id) for k in seen]
        raw = np.zeros(len(problem.units))
        original, target = None, problem.target_index
        if engine.batch_tolerance > 0:
            # batches answer within a tolerance of each text alone: the text itself runs alone,
            # so its probability is the one a prediction shows
            original = engine.label_probabilities(batch)[0]
            target = int(original.argmax()) if target is None else target
        per_pass = max(1, int(rows_per_pass))
        for first in range(0, max(len(rows), 1), per_pass):
            if first:
                problem.checkpoint()
            chunk = rows[first:first + per_pass]
            variants = _stack(batch, chunk, engine.encoder.pad_token_id, with_original=original is None)
            if not chunk and original is not None:
                break  # no word to remove, and the text has its answer
            probabilities = engine.label_probabilities(variants)
            if original is None:
                original, probabilities = probabilities[0], probabilities[1:]
                target = int(original.argmax()) if target is None else target
            for k, p in zip(seen[first:first + per_pass], probabilities):
                raw[k] = original[target] - p[target]
        assert original is not None and target is not None  # the loop runs at least once
        return raw, original, target, {"mode": mode}

    @staticmethod
    def _variant(batch: EncodedBatch, positions: Sequence[int], mode: str,
                 mask_id: int | None) -> tuple[np.ndarray, np.ndarray]:
        n = batch.lengths[0]
        ids, types = batch.input_ids[0, :n].copy(), batch.token_type_ids[0, :n].copy()
        if mode == "mask":
            ids[list(positions)] = mask_id
            return ids, types
        keep = np.ones(n, dtype=bool)
        keep[list(positions)] = False
        return ids[keep], types[keep]


def _stack(batch: EncodedBatch, rows: list[tuple[np.ndarray, np.ndarray]], pad_id: int,
           with_original: bool) -> EncodedBatch:
    n = batch.lengths[0]
    if with_original:
        rows = [(batch.input_ids[0, :n], batch.token_type_ids[0, :n])] + rows
    width = max(len(ids) for ids, _ in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    types = np.zeros((len(rows), width), dtype=np.int64)
    for i, (row_ids, row_types) in enumerate(rows):
        ids[i, :len(row_ids)] = row_ids
        mask[i, :len(row_ids)] = 1
        types[i, :len(row_types)] = row_types
    item = batch.inputs[0]
    return EncodedBatch([item] * len(rows), ids, mask, types, [[None] * width] * len(rows),
                        [False] * len(rows), [()] * len(rows), [int(m.sum()) for m in mask])


def choose_method(engine: InferenceEngine, method: str) -> AttributionMethod:
    if method == "auto":
        usable = [m for m in METHODS.values() if m.applicable(engine)]
        return max(usable, key=lambda m: m.preference)()
    cls = METHODS.get(method)
    if cls is None:
        raise UnsupportedOperation(f"Unknown attribution method '{method}'; use {', '.join(METHODS)} or auto.")
    if not cls.applicable(engine):
        raise UnsupportedOperation(
            f"{engine.name} ({engine.format}) cannot give gradients; use word ablation for this model."
        )
    return cls()


def attribute(engine: InferenceEngine, item: ModelInput, *, target: str | None = None, method: str = "auto",
              segments: Sequence[int] | None = None, checkpoint: Callable[[], None] | None = None,
              **options: Any) -> Attribution:
    """Score every word of ``item`` for ``target`` (default: the predicted label).

    ``segments`` limits scoring to some texts of a pair (for example only the hypothesis the
    annotator wrote); words of the other texts still reach the model but get no score.
    ``checkpoint`` is called between the method's forward passes; it may use the engine for
    other work (its time is not counted in ``latency_ms``) or raise ``Cancelled`` to stop.
    """
    if not isinstance(engine.head, ClassificationHead):
        raise UnsupportedOperation(f"Attributions explain labels; {engine.name} answers with spans.")
    if target is not None and target not in engine.labels:
        raise UnsupportedOperation(f"'{target}' is not a label of {engine.name} ({', '.join(engine.labels)}).")
    chosen = choose_method(engine, method)
    start = time.perf_counter()
    batch = engine.encode([item])
    texts = batch.segments(0)
    wanted = range(len(texts)) if segments is None else segments
    units = [u for k in wanted for u in group_tokens(texts[k], k, batch.segment_offsets(0, k))]
    paused = [0.0]

    def timed_checkpoint() -> None:
        if checkpoint is not None:
            began = time.perf_counter()
            try:
                checkpoint()
            finally:
                paused[0] += time.perf_counter() - began

    problem = _Problem(engine, batch, units, None if target is None else engine.labels.index(target),
                       timed_checkpoint)
    raw, probabilities, target_index, details = chosen.run(problem, **options)
    scale = float(np.abs(raw).max()) if len(raw) else 0.0
    words = tuple(
        WordScore(u.segment, u.text, u.start, u.end, float(r / scale) if scale > 0 else 0.0, float(r), u.seen)
        for u, r in zip(units, raw)
    )
    return Attribution(
        words=words, target=engine.labels[target_index], predicted=engine.labels[int(np.argmax(probabilities))],
        target_probability=float(probabilities[target_index]), method=chosen.name,
        latency_ms=(time.perf_counter() - start - paused[0]) * 1000, model_sha=engine.sha256, truncated=batch.truncated[0],
        convergence_delta=details.pop("convergence_delta", None), n_steps=details.pop("n_steps", None),
        details=details,
    )
