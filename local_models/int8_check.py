"""Whether an int8 graph rebuilt from its recipe is the graph that was checked: judged by what it answers.

    check = record_check(engine, graph, task_texts)    # where the recipe is made: the reference build's answers
    outcome = verify_check(engine, graph, check)       # on a desk: the graph built there, on the same texts
    outcome.passed, outcome.summary

The parity rule ran on thousands of task texts where the recipe was made; a desk cannot run it again (at
first start it has no task texts). It rebuilds the int8 graph from the fp32 graph it exported itself, and
the bytes of that graph depend on the exporter's releases (transformers, torch, onnxscript, onnx) and on
onnxruntime's quantizer: a release that names nodes or orders weights otherwise changes every byte and
nothing of the function. So the recipe records a few check texts and the probabilities the reference
build gave on them, and a graph built elsewhere is taken when, on every check text, it gives the same
decision and no probability moves by more than ``MAX_CHECK_CHANGE``. The graph's sha256 stays as
information, and as a fast path: the very bytes that were checked need no second look.

What the bound means, measured on the bundled model: reordered weights, renamed nodes and an extra
Identity leave every probability the same to the bit (change 0), and so do 1 or 2 threads; one weight
matrix scaled by 1.05 moves them by 0.08 and changes labels. But dynamic int8 quantizes each MatMul's input
per call from its own range, so a float change far below the bound is not damped, it is drawn anew: one
weight matrix scaled by 1 + 2^-22 moves the fp32 graph's probabilities by 5e-7 and the int8 graph's by 0.055,
the size of int8's own rounding noise (p99 0.036 against fp32). The check therefore passes a graph that
computes the same float operations in the same order, whatever its bytes, and refuses one whose float
arithmetic differs at all (another op decomposition, a fused op). The recipe also keeps the fp32 graph's
answers, so a refusal says which it is: the fp32 graph built here answering as the recipe's (the same model,
its int8 rounding landing elsewhere) or answering otherwise (another model, tokenizer or exporter).

The check texts are the project's own sentences (``CHECK_SENTENCES``: never task data, so a recipe kept
in the repository holds none of a data set), spread over token lengths and, within each length, those
whose probabilities are furthest from 0 and 1 first (a saturated probability hides a changed function).
Every decision the model makes on them is kept at least ``PER_DECISION`` times; a decision they never
get is filled from the model's own parity texts where the recipe allows it.
"""

from __future__ import annotations

import bisect
import importlib.metadata
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from local_models.tokenization import ModelInput

if TYPE_CHECKING:
    from local_models.engine import InferenceEngine

MAX_CHECK_CHANGE = 1e-4
CHECK_TEXTS = 24  # at most
# Bands of token counts (specials included) the check texts are spread over, short texts most finely
LENGTH_EDGES = (3, 5, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
PER_DECISION = 2
TASK_TEXTS_LOOKED_AT = 200  # parity texts run to fill a decision the project's sentences never get
SHOWN = 5  # differing texts named in a refusal
TOOLCHAIN = ("transformers", "torch", "tokenizers", "onnx", "onnxscript", "onnxruntime")

_SUBJECTS = ("Women", "Immigrants", "My neighbours", "The new teacher", "People from that city", "Muslims",
             "Gay people", "Football fans", "Those refugees", "Old people")
_PREDICATES = ("are wonderful people", "should go back where they came from", "are ruining everything",
               "made dinner for us tonight", "are vermin and should be removed", "deserve the same rights as anyone",
               "never stop complaining about the weather", "helped me move house last week",
               "are a disease on this country", "are so annoying lol")
_LONGER = (
    "I waited for the bus for forty minutes this morning, and when it finally came the driver was friendly "
    "and apologised to everyone, which honestly made my day a little better.",
    "Some people on this forum keep saying that those people are dirty animals who should be kicked out of the "
    "country, and I am tired of reading it every single day.",
    "The council meeting about the new park ran late again; residents argued about parking, the playground, the "
    "budget and whether dogs should be allowed on the grass near the pond.",
    "you are all a bunch of worthless idiots and your whole family should be ashamed of you, get lost",
)
_SHORT = tuple(f"{subject} {predicate}." for subject in _SUBJECTS for predicate in _PREDICATES)
# The project's own sentences: everyday and hostile, about groups and people, from a word to past the
# longest model input (runs of the short ones joined), so every length band a desk meets has texts
CHECK_SENTENCES: tuple[str, ...] = (
    ("ok", "!!!", "lol", "why though", "ur all s0 st00pid lmao", "Have a lovely weekend, everyone!")
    + _SHORT + _LONGER
    + tuple(" ".join(_SHORT[start:start + run]) for run in (3, 6, 12, 24, 48) for start in (run, 2 * run + 1)))


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    texts: int
    max_change: float
    differing: tuple[dict[str, Any], ...] = ()  # per text: "text", "change", "then", "now" (decisions in words)
    problem: str = ""  # a check that could not compare at all (no texts, other outputs)
    fp32_change: float | None = None  # on a refusal: how far the fp32 graph built here is from the recipe's

    @property
    def summary(self) -> str:
        if self.problem:
            return self.problem
        if self.passed:
            return (f"the same decisions on all {self.texts} check texts, probabilities within {self.max_change:.1e} "
                    f"(allowed {MAX_CHECK_CHANGE:g})")
        shown = "; ".join(f"{_quoted(d['text'])}: probability moved by {d['change']:.2g}"
                          + (f", decision {d['then']} -> {d['now']}" if d["then"] != d["now"] else "")
                          for d in self.differing[:SHOWN])
        more = f"; and {len(self.differing) - SHOWN} more" if len(self.differing) > SHOWN else ""
        changed = sum(d["then"] != d["now"] for d in self.differing)
        return (f"{len(self.differing)} of {self.texts} check texts answer otherwise (largest probability change "
                f"{self.max_change:.2g}, allowed {MAX_CHECK_CHANGE:g}; {changed} decision(s) changed): {shown}{more}"
                f"{self._fp32_words()}")

    def _fp32_words(self) -> str:
        if self.fp32_change is None:
            return ""
        if self.fp32_change <= MAX_CHECK_CHANGE:
            return (f". The fp32 graph it was built from answers as the recipe's did (within {self.fp32_change:.1e}): "
                    "the same model, whose float arithmetic differs slightly (another exporter or runtime "
                    "release), and int8 rounding turns that into the changes above")
        return (f". The fp32 graph it was built from answers otherwise too (by up to {self.fp32_change:.2g}): "
                "another model, tokenizer or exporter than the recipe was made for")

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "texts": self.texts, "max_change": self.max_change,
                "allowed": MAX_CHECK_CHANGE, "differing": len(self.differing), "fp32_change": self.fp32_change,
                "summary": self.summary}


def toolchain_versions() -> dict[str, str]:
    """The releases that shape an exported and quantized graph. From installed metadata, without importing
    the packages (a desk asks at start); a frozen bundle without metadata gives a module's own version."""
    versions = {}
    for name in TOOLCHAIN:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = str(getattr(sys.modules.get(name), "__version__", "unknown"))
    return versions


def toolchain_changes(then: Mapping[str, Any] | None, now: Mapping[str, str] | None = None) -> list[str]:
    """In words, which releases differ from those ``then`` records ("transformers 5.24.0 here, 5.23.0 then")."""
    now = now if now is not None else toolchain_versions()
    return [f"{name} {now[name]} here, {then[name]} when the recipe was made"
            for name in TOOLCHAIN if then and name in then and name in now and then[name] != now[name]]


def record_check(engine: InferenceEngine, graph: Path, task_texts: Sequence[ModelInput] = (), *,
                 fp32: Path | None = None, limit: int = CHECK_TEXTS) -> dict[str, Any]:
    """The check a recipe carries: texts chosen from ``CHECK_SENTENCES`` (and, only for a decision those
    never get, from ``task_texts``) and the probabilities ``graph`` (the reference build) gives on them;
    with ``fp32`` (the graph it was quantized from), that graph's probabilities too, to explain a refusal."""
    from local_models.files import file_sha256

    pairs = bool(task_texts) and not isinstance(task_texts[0], str)
    pool: list[ModelInput] = _pool(pairs)
    answers = _answers(engine, graph, pool)
    chosen = _spread(engine, pool, answers, limit)
    missing = _missing_decisions(engine, answers, chosen)
    if missing and task_texts:
        looked_at = list(dict.fromkeys(task_texts[:TASK_TEXTS_LOOKED_AT]))
        extra = _answers(engine, graph, looked_at)
        for decision in missing:
            found = [i for i, (_, d) in enumerate(extra) if _decision_label(engine, d) == decision]
            found.sort(key=lambda i: -_sensitivity(extra[i][0]))
            for i in found[:PER_DECISION]:
                pool.append(looked_at[i])
                answers.append(extra[i])
                chosen.append(len(pool) - 1)
    chosen = chosen[:limit + PER_DECISION * len(missing)]
    texts = [pool[i] for i in chosen]
    record: dict[str, Any] = {
        "texts": [_jsonable(t) for t in texts], "probabilities": [[float(v) for v in answers[i][0]] for i in chosen],
        "decisions": [list(answers[i][1]) for i in chosen], "max_change": MAX_CHECK_CHANGE,
        "int8_sha256": file_sha256(graph), "made_with": toolchain_versions()}
    if fp32 is not None:
        record["fp32_probabilities"] = [[float(v) for v in p] for p, _ in _answers(engine, fp32, texts)]
    return record


def verify_check(engine: InferenceEngine, graph: Path, check: Mapping[str, Any], *,
                 fp32: Path | None = None) -> CheckOutcome:
    """How ``graph`` answers the recorded check texts beside the recorded answers. On a refusal, ``fp32``
    (the graph it was built from) is compared with the recipe's fp32 answers, to say why."""
    try:
        texts = [_model_input(t) for t in check["texts"]]
        then = [np.asarray(p, dtype=np.float64) for p in check["probabilities"]]
        then_decisions = [tuple(int(v) for v in d) for d in check["decisions"]]
    except (KeyError, TypeError, ValueError) as exc:
        return CheckOutcome(False, 0, float("nan"), problem=f"the recipe's check texts cannot be read ({exc})")
    if not texts or len(then) != len(texts) or len(then_decisions) != len(texts):
        return CheckOutcome(False, len(texts), float("nan"), problem="the recipe's check has no texts, or fewer "
                            "answers than texts")
    now = _answers(engine, graph, texts)
    worst, differing = 0.0, list[dict[str, Any]]()
    for text, p_then, d_then, (p_now, d_now) in zip(texts, then, then_decisions, now):
        if p_then.shape != p_now.shape:
            return CheckOutcome(False, len(texts), float("inf"), problem=(
                f"the graph built here gives {p_now.size} probabilities for {_quoted(text)}, the recorded answer "
                f"{p_then.size}: it is not the model the recipe was made for"))
        change = float(np.abs(p_then - p_now).max())
        worst = max(worst, change)
        if change > MAX_CHECK_CHANGE or d_then != tuple(d_now):
            differing.append({"text": text, "change": change, "then": _decision_label(engine, d_then),
                              "now": _decision_label(engine, tuple(d_now))})
    differing.sort(key=lambda d: (d["then"] == d["now"], -float(d["change"])))
    if not differing:
        return CheckOutcome(True, len(texts), worst)
    fp32_change = _fp32_change(engine, fp32, texts, check)
    return CheckOutcome(False, len(texts), worst, tuple(differing), fp32_change=fp32_change)


def _fp32_change(engine: InferenceEngine, fp32: Path | None, texts: Sequence[ModelInput],
                 check: Mapping[str, Any]) -> float | None:
    recorded = check.get("fp32_probabilities")
    if fp32 is None or not isinstance(recorded, list) or len(recorded) != len(texts):
        return None
    try:
        return max(float(np.abs(np.asarray(then, dtype=np.float64) - now).max())
                   for then, (now, _) in zip(recorded, _answers(engine, fp32, texts)))
    except (TypeError, ValueError):  # other shapes: the answers cannot be compared
        return float("inf")


def _answers(engine: InferenceEngine, graph: Path, items: Sequence[ModelInput]) -> list[Any]:
    from local_models.int8_search import run_graph

    return run_graph(engine, graph, items)


def _pool(pairs: bool) -> list[ModelInput]:
    if not pairs:
        return list(CHECK_SENTENCES)
    half = len(CHECK_SENTENCES) // 2
    return [(a, b) for a, b in zip(CHECK_SENTENCES[:half], CHECK_SENTENCES[half:])]


def _spread(engine: InferenceEngine, pool: Sequence[ModelInput], answers: Sequence[Any], limit: int) -> list[int]:
    """Texts taken in turn from each band of token lengths (in a band, the least saturated first), with room
    kept for ``PER_DECISION`` texts of each decision the pool gets; at most ``limit``."""
    lengths = engine.encode(list(pool)).lengths
    bands: dict[int, list[int]] = {}
    for i in range(len(pool)):
        bands.setdefault(bisect.bisect_left(LENGTH_EDGES, int(lengths[i])), []).append(i)
    queues = [sorted(band, key=lambda i: (-_sensitivity(answers[i][0]), i)) for _, band in sorted(bands.items())]
    decisions = sorted({tuple(a[1]) for a in answers})
    chosen = _in_turn(queues, limit - PER_DECISION * len(decisions), [])
    for decision in decisions:
        have = sum(tuple(answers[i][1]) == decision for i in chosen)
        ranked = sorted((i for i in range(len(pool)) if tuple(answers[i][1]) == decision and i not in chosen),
                        key=lambda i: (-_sensitivity(answers[i][0]), i))
        chosen += ranked[:max(0, PER_DECISION - have)]
    return _in_turn(queues, limit, chosen)[:limit]


def _in_turn(queues: Sequence[Sequence[int]], count: int, chosen: list[int]) -> list[int]:
    """``chosen`` topped up to ``count``, one text from each band in turn."""
    chosen = list(chosen)
    taken = set(chosen)
    positions = [0] * len(queues)
    while len(chosen) < count:
        added = False
        for band, queue in enumerate(queues):
            while positions[band] < len(queue) and queue[positions[band]] in taken:
                positions[band] += 1
            if positions[band] < len(queue) and len(chosen) < count:
                chosen.append(queue[positions[band]])
                taken.add(queue[positions[band]])
                added = True
        if not added:
            break
    return chosen


def _missing_decisions(engine: InferenceEngine, answers: Sequence[Any], chosen: Sequence[int]) -> list[str]:
    """The model's labels that no chosen text gets (classification only)."""
    labels = list(getattr(engine.runtime, "model_labels", []) or [])
    if not engine.runtime.head_type.has_labels or not labels:
        return []
    got = {_decision_label(engine, answers[i][1]) for i in chosen}
    return [label for label in labels if label not in got]


def _decision_label(engine: InferenceEngine, decision: Sequence[int]) -> str:
    labels = list(getattr(engine.runtime, "model_labels", []) or [])
    if engine.runtime.head_type.has_labels and len(decision) == 1 and 0 <= decision[0] < len(labels):
        return str(labels[decision[0]])
    return "answer span " + "-".join(map(str, decision))


def _sensitivity(probabilities: np.ndarray) -> float:
    """How far the top probability is from 1: where a changed function shows in the probabilities."""
    return float(1.0 - np.max(probabilities)) if probabilities.size else 0.0


def _jsonable(item: ModelInput) -> Any:
    return item if isinstance(item, str) else list(item)


def _model_input(value: Any) -> ModelInput:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return (value[0], value[1])
    raise ValueError(f"not a text or a pair of texts: {str(value)[:40]!r}")


def _quoted(item: ModelInput) -> str:
    text = item if isinstance(item, str) else " / ".join(item)
    return repr(text if len(text) <= 48 else text[:45] + "...")
