"""Finding an int8 recipe that keeps a model's decisions on its task's texts, and recording it.

    search = search_int8(source_engine, fp32_file, TaskTexts(parity, calibration, "dev+test"), workdir)
    search.recipe, search.verdict, search.int8_sha256, search.attempts
    write_recipe_file(folder, search)           # int8_recipe.json beside a trained part
    recorded = read_recipe_file(folder)         # ValueError in words when it is missing or broken

Order of attempts (fastest graph first; the first that passes wins):

1. dynamic int8, weights per channel, of the fused graph (``local_models.fused_graph``: Attention,
   SkipLayerNormalization, BiasGelu nodes; its Attention quantized too; its SkipLayerNormalization
   written back as Add + LayerNormalization, ``local_models.layer_norm``, whose kernels are faster),
   then of the plain export;
2. the same with the few outlier channels of MatMul inputs kept in float (``int8.float_channels_at``
   over ``RANKING_TEXTS`` texts: a peak above a ratio times the median channel's), at each ratio of
   ``FLOAT_CHANNEL_STEPS`` (6x, then 4x and 3x with more channels), fused graph first at each ratio:
   a few float channels cost far less than a whole float MatMul;
3. the widest split with the ``COMBINED_LADDER`` MatMuls that lose most under int8 kept in float;
4. plain dynamic int8 with the k MatMuls that lose most kept in float (``int8.node_errors``: one float
   run over ``RANKING_TEXTS`` texts ranks them all), for k in ``LADDER``.

A model the fuser does not fit (no attention fused, or a fused graph that answers otherwise) skips
the fused attempts; the search records why (``Int8Search.fusion``). Every attempt records its latency:
the median and 95th percentile of the int8 graph's calls on the texts it was judged on, one text per
call on the desk's thread count, so a slow form is seen before it is chosen.

Each attempt is reported as it runs ("attempt 3 of 10: ..., on 4,963 parity texts"), with the texts
it has run so far as the progress handle's reports.

With at least ``SELECTION_TEXTS`` calibration texts (training texts, apart from the parity texts),
each attempt must first pass on those; only then is it measured on the parity texts, so the
figures that decide are not the figures the choice was tuned on. Every attempt is recorded.

The float reference runs in batches; the int8 graph runs one text at a time, as a desk predicts
while an annotator types (dynamic int8 scales activations per call, so batches would differ).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from local_models.errors import ExportFailed, ParityCheckFailed
from local_models.files import file_sha256
from local_models.fused_graph import FusionUnavailable, export_fused_graph
from local_models.heads import softmax
from local_models.int8 import Feeds, Int8Recipe, build_int8, float_channels_at, input_peaks, node_errors
from local_models.parity import MIN_TEXTS, ParityFigures, ParityVerdict, figures_from, judge
from local_models.progress import Progress
from local_models.tokenization import ModelInput

if TYPE_CHECKING:
    from local_models.engine import InferenceEngine

log = logging.getLogger(__name__)

RECIPE_FILE = "int8_recipe.json"
FUSED_FILE = "fused-fp32.onnx"
RECIPE_FORMAT = "dynadesk-int8-recipe"
LADDER = (4, 8, 12, 16, 24)
FLOAT_CHANNEL_RATIO = 6.0
# The outlier-channel split, from the fewest channels kept in float to more: (peak ratio, at most this many
# channels per tensor). A few float channels cost far less than a whole float MatMul, so all come first.
FLOAT_CHANNEL_STEPS = ((FLOAT_CHANNEL_RATIO, 4), (4.0, 8), (3.0, 16))
COMBINED_LADDER = (2, 4)  # then the widest split with the few most sensitive MatMuls in float
RANKING_TEXTS = 96
SELECTION_TEXTS = 1000
REFERENCE_BATCH = 32
REPORT_EVERY = 50  # texts between two progress reports of an attempt
Answer = tuple[np.ndarray, tuple[int, ...]]  # a text's probabilities, and the decision they make


@dataclass(frozen=True)
class TaskTexts:
    parity: tuple[ModelInput, ...]  # what the rule is measured on: held-out texts first
    calibration: tuple[ModelInput, ...] = ()  # training texts: ranking and selection, apart from the parity texts
    source: str = "task texts"
    # whether parity texts may join the recipe's check texts (``local_models.int8_check``) when the project's
    # own sentences miss a label; False for a recipe kept in the repository: no data set is copied into it
    shareable: bool = True


@dataclass(frozen=True)
class Int8Search:
    recipe: Int8Recipe | None  # None: no int8 form passes (or none was tried); ``reason`` says why
    verdict: ParityVerdict | None  # the chosen recipe's verdict on the parity texts (or the last one measured)
    int8_sha256: str | None  # of the graph ``build_int8`` makes from the fp32 graph with ``recipe``
    fp32_sha256: str
    reason: str = ""
    attempts: tuple[dict[str, Any], ...] = ()
    texts: dict[str, Any] = field(default_factory=dict)
    measured: Int8Recipe | None = None  # the recipe ``verdict`` belongs to when none passed (what --force keeps)
    check: dict[str, Any] | None = None  # the chosen graph's answers on its check texts (``int8_check``)
    fusion: dict[str, Any] = field(default_factory=dict)  # the fused graph: its op counts, or why there is none
    latency: dict[str, Any] | None = None  # the chosen form's latency, as measured in its attempt

    @property
    def passed(self) -> bool:
        return self.recipe is not None and self.verdict is not None and self.verdict.passed

    def to_json(self) -> dict[str, Any]:
        import onnx
        import onnxruntime

        return {"format": RECIPE_FORMAT, "format_version": 1, "onnxruntime": onnxruntime.__version__,
                "onnx": onnx.__version__, "fp32_sha256": self.fp32_sha256, "int8_sha256": self.int8_sha256,
                "recipe": self.recipe.to_json() if self.recipe is not None else None,
                "recipe_name": self.recipe.name if self.recipe is not None else None,
                "parity": self.verdict.to_json() if self.verdict is not None else None,
                "reason": self.reason, "texts": self.texts, "attempts": list(self.attempts),
                **({"check": self.check} if self.check is not None else {}),
                **({"fusion": self.fusion} if self.fusion else {}),
                **({"latency": self.latency} if self.latency else {})}


@dataclass(frozen=True)
class RecordedInt8:
    """A recipe file as read back: what to build, and the figures its graph was checked with."""

    recipe: Int8Recipe | None
    int8_sha256: str | None
    parity: dict[str, Any] | None
    reason: str
    document: dict[str, Any]

    @property
    def usable(self) -> bool:
        return self.recipe is not None and bool(self.int8_sha256) and bool((self.parity or {}).get("passed"))

    @property
    def check(self) -> dict[str, Any] | None:
        """The check texts and the answers the checked graph gave on them; None in recipes made before."""
        check = self.document.get("check")
        return check if isinstance(check, dict) else None

    @property
    def deferred(self) -> bool:
        """The search has not run yet (``--int8 later``): no verdict, the fp32 form serves meanwhile."""
        return self.recipe is None and bool(self.document.get("deferred"))


def search_int8(source: InferenceEngine, fp32_file: Path, texts: TaskTexts, workdir: Path, *,
                progress: Progress | None = None, ladder: Sequence[int] | None = None,
                fused: bool = True) -> Int8Search:
    """Try the recipes in order; the first that passes the rule on ``texts.parity`` is chosen.
    ``ladder``: how many of the most sensitive MatMuls to keep in float, in turn (default ``LADDER``);
    ``fused``: try the fused graph first (when the model has one)."""
    progress = progress or Progress()
    ladder = LADDER if ladder is None else ladder
    workdir.mkdir(parents=True, exist_ok=True)
    fp32_sha = file_sha256(fp32_file)
    counts = {"parity": len(texts.parity), "calibration": len(texts.calibration), "source": texts.source}
    if len(texts.parity) < MIN_TEXTS:
        return Int8Search(None, None, None, fp32_sha, reason=(
            f"int8 not used: only {len(texts.parity):,} task texts to check it on ({texts.source}); the parity rule "
            f"needs at least {MIN_TEXTS:,}, so the float model serves"), texts=counts)
    selection = list(texts.calibration[:SELECTION_TEXTS]) if len(texts.calibration) >= SELECTION_TEXTS else []
    fused_file, fusion = _fused_graph(source, workdir, progress) if fused else (None, {})
    progress.say(f"the float model's answers on {len(texts.parity) + len(selection):,} task texts")
    reference = probabilities(source, list(texts.parity), progress)
    selection_reference = probabilities(source, selection, progress) if selection else None
    attempts: list[dict[str, Any]] = []
    candidates: list[Int8Recipe] = ([Int8Recipe("dynamic", fused=True, plain_layer_norm=True)] if fused_file else []) + [Int8Recipe("dynamic")]
    first_round = len(candidates)
    ranked: list[str] | None = None
    last: tuple[Int8Recipe, ParityVerdict, str] | None = None
    index = 0
    while index < len(candidates):
        progress.check()
        recipe = candidates[index]
        index += 1
        of = f"{index} of {len(candidates)}" if ranked is not None else f"{index} (more follow if it fails)"
        graph = workdir / f"attempt-{index}.onnx"
        start = fused_file if recipe.fused and fused_file is not None else fp32_file
        build_int8(start, graph, recipe)
        if selection_reference is not None:
            progress.say(f"attempt {of}: {recipe.name}, on {len(selection):,} selection texts")
            timings: list[float] = []
            tuned = judge(compare(selection_reference, run_graph(source, graph, selection, progress, timings),
                                  "selection texts"), min_texts=0)
            attempts.append(_attempt(recipe, tuned, "selection", _latency(timings)))
            if not tuned.passed:
                progress.say(f"attempt {of}: {recipe.name}: failed on the selection texts ({tuned.reason})")
        if selection_reference is None or tuned.passed:
            progress.say(f"attempt {of}: {recipe.name}, on {len(texts.parity):,} parity texts")
            timings = []
            verdict = judge(compare(reference, run_graph(source, graph, list(texts.parity), progress, timings),
                                    texts.source))
            latency = _latency(timings)
            attempts.append(_attempt(recipe, verdict, "parity", latency))
            last = (recipe, verdict, file_sha256(graph))
            progress.say(f"attempt {of}: {recipe.name}: {'passed' if verdict.passed else verdict.reason}")
            if verdict.passed:
                from local_models.int8_check import record_check

                # the graph the recipe quantizes (the fused one for a fused recipe) is what a desk rebuilds from
                check = record_check(source, graph, list(texts.parity) if texts.shareable else [], fp32=start)
                return Int8Search(recipe, verdict, last[2], file_sha256(start), attempts=tuple(attempts),
                                  texts=counts, fusion=fusion, latency=latency, check=check)
        if ranked is None and index >= first_round:  # the first round failed: measure once, then cheaper recipes
            pool = [feeds_for(source, [t]) for t in list(texts.calibration or texts.parity)[:RANKING_TEXTS]]
            ranked = [name for name, _ in node_errors(fp32_file, pool)]
            fused_peaks = input_peaks(fused_file, pool) if fused_file is not None else None
            candidates += fallback_recipes(input_peaks(fp32_file, pool), ranked, ladder, fused_peaks)
        graph.unlink(missing_ok=True)
    tried = f"{len(candidates)} int8 recipe(s) tried"
    if last is None:
        best = max(attempts, key=lambda a: (a["agreement"], -a["p99_change"]))
        return Int8Search(None, None, None, fp32_sha, reason=(
            f"int8 not used: none of the {tried} passed on the selection texts (the best kept "
            f"{best['agreement']:.2%} of {best['texts']:,} labels, p99 change {best['p99_change']:.3f})"),
            attempts=tuple(attempts), texts=counts, fusion=fusion)
    return Int8Search(None, last[1], None, fp32_sha, reason=f"int8 not used: none of the {tried} passed the parity "
                      f"rule; the last one measured ({last[0].name}): {last[1].reason}", attempts=tuple(attempts),
                      texts=counts, measured=last[0], fusion=fusion)


def _fused_graph(source: InferenceEngine, workdir: Path, progress: Progress) -> tuple[Path | None, dict[str, Any]]:
    """The fused fp32 graph of ``source`` in ``workdir`` and what it holds; (None, why not) when there is none."""
    progress.say("exporting the fused graph (Attention, SkipLayerNormalization, GELU nodes)")
    try:
        fused = export_fused_graph(source, workdir / FUSED_FILE)
    except FusionUnavailable as exc:
        progress.say(f"no fused graph: {exc}")
        return None, {"available": False, "reason": str(exc)}
    except ExportFailed as exc:
        log.warning("no fused graph for %s: %s", source.name, exc)
        return None, {"available": False, "reason": str(exc)}
    return fused.path, {"available": True, "counts": fused.counts, "max_difference": fused.max_difference}


def fallback_recipes(peaks: Mapping[str, Any], ranked: Sequence[str], ladder: Sequence[int],
                     fused_peaks: Mapping[str, Any] | None = None) -> list[Int8Recipe]:
    """What follows plain dynamic int8 when it fails, cheapest graph first: the outlier-channel split at
    each of ``FLOAT_CHANNEL_STEPS`` (a step that keeps the same channels as the one before is skipped),
    of the fused graph first (``fused_peaks``: its MatMul inputs' peaks) and then of the plain export,
    the widest split with the ``COMBINED_LADDER`` most sensitive MatMuls in float, then the plain ladder
    of k most sensitive MatMuls in float (``ranked``: most sensitive first)."""
    recipes: list[Int8Recipe] = []
    widest: Mapping[str, tuple[int, ...]] = {}
    widest_fused: Mapping[str, tuple[int, ...]] = {}
    for ratio, most in FLOAT_CHANNEL_STEPS:
        if fused_peaks is not None:
            fused_channels = float_channels_at(fused_peaks, ratio, most)
            if fused_channels and fused_channels != widest_fused:
                recipes.append(Int8Recipe("dynamic", float_channels=fused_channels, float_channel_ratio=ratio,
                                          fused=True, plain_layer_norm=True))
                widest_fused = fused_channels
        channels = float_channels_at(peaks, ratio, most)
        if channels and channels != widest:
            recipes.append(Int8Recipe("dynamic", float_channels=channels, float_channel_ratio=ratio))
            widest = channels
    if widest:
        ratio = next(r.float_channel_ratio for r in reversed(recipes) if not r.fused)
        recipes += [Int8Recipe("dynamic", excluded_nodes=tuple(ranked[:k]), float_channels=widest,
                               float_channel_ratio=ratio) for k in COMBINED_LADDER if k < len(ranked)]
    return recipes + [Int8Recipe("dynamic", excluded_nodes=tuple(ranked[:k])) for k in ladder if k < len(ranked)]


def _latency(timings: Sequence[float]) -> dict[str, Any] | None:
    """Milliseconds per call of an attempt's graph, as ``run_graph`` timed them."""
    from local_models.engine import default_num_threads

    if not timings:
        return None
    return {"median_ms": round(float(np.median(timings)), 3), "p95_ms": round(float(np.quantile(timings, 0.95)), 3),
            "calls": len(timings), "threads": default_num_threads(), "where": "int8 search, one text per call"}


def _attempt(recipe: Int8Recipe, verdict: ParityVerdict, stage: str,
             latency: dict[str, Any] | None = None) -> dict[str, Any]:
    figures = verdict.figures
    return {"recipe": recipe.name, "stage": stage, "texts": figures.texts, "agreement": figures.agreement,
            "labels_changed": figures.labels_changed, "p99_change": figures.p99_change,
            "max_change": figures.max_change, "mean_change": figures.mean_change, "passed": verdict.passed,
            **({"fused": True} if recipe.fused else {}), **({"latency": latency} if latency else {})}


def feeds_for(engine: InferenceEngine, items: Sequence[ModelInput]) -> dict[str, np.ndarray]:
    batch = engine.encode(items)
    return {"input_ids": batch.input_ids.astype(np.int64), "attention_mask": batch.attention_mask.astype(np.int64),
            "token_type_ids": batch.token_type_ids.astype(np.int64)}


def probabilities(engine: InferenceEngine, items: Sequence[ModelInput],
                  progress: Progress | None = None) -> list[Answer]:
    """Per text, the probabilities the float model gives (classification: over its labels; extractive
    QA: start then end over the text's own tokens), in batches of similar length."""
    order = sorted(range(len(items)), key=lambda i: len(str(items[i])))
    result: list[Answer] = [(np.empty(0), ())] * len(items)
    for first in range(0, len(order), REFERENCE_BATCH):
        if progress is not None:
            progress.check()
            progress.report(first, len(order))
        chunk = order[first:first + REFERENCE_BATCH]
        batch = engine.encode([items[i] for i in chunk])
        outputs = engine.forward(batch)
        for row, i in enumerate(chunk):
            result[i] = _text_probabilities(outputs, row, int(batch.attention_mask[row].sum()))
    return result


def run_graph(engine: InferenceEngine, graph: Path, items: Sequence[ModelInput],
              progress: Progress | None = None, timings: list[float] | None = None) -> list[Answer]:
    """Per text, the probabilities an ONNX graph gives, one text at a time, on the desk's thread count.
    ``timings``: receives each call's milliseconds."""
    import time

    import onnxruntime

    from local_models.engine import default_num_threads

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = default_num_threads()
    session = onnxruntime.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    result = []
    for done, item in enumerate(items):
        if progress is not None and done % REPORT_EVERY == 0:
            progress.check()
            progress.report(done, len(items))
        feeds = {k: v for k, v in feeds_for(engine, [item]).items() if k in names}
        started = time.perf_counter()
        values = dict(zip(outputs, session.run(outputs, feeds)))
        if timings is not None:
            timings.append((time.perf_counter() - started) * 1000)
        result.append(_text_probabilities(values, 0, int(feeds["attention_mask"][0].sum())))
    return result


def _text_probabilities(outputs: Mapping[str, np.ndarray], row: int, length: int) -> Answer:
    if "logits" in outputs:
        p = softmax(np.asarray(outputs["logits"][row], dtype=np.float64))
        return p, (int(p.argmax()),)
    start = softmax(np.asarray(outputs["start_logits"][row][:length], dtype=np.float64))
    end = softmax(np.asarray(outputs["end_logits"][row][:length], dtype=np.float64))
    return np.concatenate([start, end]), (int(start.argmax()), int(end.argmax()))


def compare(reference: Sequence[Answer], candidate: Sequence[Answer], source: str) -> ParityFigures:
    """Figures over texts; a decision is the label (extractive QA: the start and the end token)."""
    change, same = np.empty(len(reference)), np.empty(len(reference), dtype=bool)
    for i, ((a, decided_a), (b, decided_b)) in enumerate(zip(reference, candidate)):
        if a.shape != b.shape:
            raise ExportFailed(f"The int8 graph answers with {b.shape} values for a text, the float model {a.shape}.")
        change[i] = float(np.abs(a - b).max())
        same[i] = decided_a == decided_b
    return figures_from(change, same, source)


def write_recipe_file(folder: Path, search: Int8Search) -> Path:
    path = Path(folder) / RECIPE_FILE
    path.write_text(json.dumps(search.to_json(), indent=1) + "\n", encoding="utf-8")
    return path


def write_deferred_recipe_file(folder: Path, reason: str, texts: dict[str, Any]) -> Path:
    """The recipe file of a part whose search was deferred: no recipe and no verdict yet."""
    path = Path(folder) / RECIPE_FILE
    document = {"format": RECIPE_FORMAT, "format_version": 1, "deferred": True, "recipe": None, "parity": None,
                "int8_sha256": None, "reason": reason, "texts": texts, "attempts": []}
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return path


def read_recipe_file(folder: Path) -> RecordedInt8:
    """The recorded recipe of the model in ``folder``; ``ValueError`` (what is wrong, what to do) when it
    is missing or broken."""
    path = Path(folder) / RECIPE_FILE
    remedy = ("make it again with `python -m local_models.quantize_default`" if (Path(folder) / "..").resolve().name
              == "models" else "train the model again with `dynadesk train`, which records one")
    if not path.is_file():
        raise ValueError(f"there is no int8 recipe ({RECIPE_FILE}) in {folder}; {remedy}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"the int8 recipe {path} is not readable JSON ({exc}); {remedy}") from exc
    if not isinstance(document, dict) or document.get("format") != RECIPE_FORMAT:
        raise ValueError(f"{path} is not a Dynadesk int8 recipe; {remedy}")
    try:
        recipe = Int8Recipe.from_json(document["recipe"]) if document.get("recipe") is not None else None
    except ValueError as exc:
        raise ValueError(f"the int8 recipe {path} is broken: {exc}; {remedy}") from exc
    parity = document.get("parity")
    if recipe is not None and (not isinstance(parity, dict) or not document.get("int8_sha256")):
        raise ValueError(f"the int8 recipe {path} has no parity figures or no checksum of its graph; {remedy}")
    return RecordedInt8(recipe, document.get("int8_sha256"), parity if isinstance(parity, dict) else None,
                        str(document.get("reason") or ""), document)


def build_recorded(fp32_file: Path, recorded: RecordedInt8, int8_file: Path, *,
                   engine: InferenceEngine | None = None) -> dict[str, Any]:
    """Build the recorded recipe's graph and make sure it is the graph that was checked: the very bytes
    (its sha256), else the same answers on the recipe's check texts (``local_models.int8_check``; ``engine``
    tokenizes them). Returns how it was verified. ``ParityCheckFailed`` when the recipe records no passing
    form or the graph built here answers otherwise; ``ExportFailed`` when the quantizer fails."""
    if not recorded.usable or recorded.recipe is None:
        raise ParityCheckFailed(recorded.reason or "the int8 recipe records no int8 form that passed its check",
                                float("nan"), recorded.parity)
    build_int8(fp32_file, int8_file, recorded.recipe)
    built = file_sha256(int8_file)
    identity = {"int8_sha256": built, "checked_int8_sha256": recorded.int8_sha256}
    if built == recorded.int8_sha256:
        return {**identity, "by": "sha256", "verified_by": "sha256 of the graph checked when the recipe was made"}
    from local_models.int8_check import toolchain_changes, verify_check

    why = _why_other_bytes(fp32_file, recorded)
    bytes_differ = (f"the int8 graph built here (sha256 {built[:12]}) is not byte for byte the one whose parity was "
                    f"checked ({str(recorded.int8_sha256)[:12]}){': ' + '; '.join(why) if why else ''}")
    check = recorded.check
    if check is None or engine is None:
        missing = ("the recipe records no check texts to compare its answers on (it was made before they were "
                   "recorded)" if check is None else "no model was given to read the check texts")
        raise ParityCheckFailed(f"{bytes_differ}, and {missing}, so its figures do not carry over", float("nan"),
                                recorded.parity)
    outcome = verify_check(engine, int8_file, check, fp32=fp32_file)
    if not outcome.passed:
        changes = toolchain_changes(check.get("made_with"))
        raise ParityCheckFailed(f"{bytes_differ}, and it answers otherwise on the recipe's check texts: "
                                f"{outcome.summary}{' (' + '; '.join(changes) + ')' if changes else ''}; so the "
                                "figures of the graph that was checked do not carry over", outcome.max_change,
                                recorded.parity)
    return {**identity, "by": "answers", "check": outcome.to_json(),
            "verified_by": f"answers on the recipe's check texts: {outcome.summary} (the bytes differ from the "
                           "graph checked when the recipe was made)"}


def _why_other_bytes(fp32_file: Path, recorded: RecordedInt8) -> list[str]:
    import onnxruntime

    why = []
    made_with = recorded.document.get("onnxruntime")
    if made_with and made_with != onnxruntime.__version__:
        why.append(f"onnxruntime {onnxruntime.__version__} here, {made_with} when it was checked")
    fp32_then = recorded.document.get("fp32_sha256")
    if fp32_then and fp32_then != file_sha256(fp32_file):
        why.append("the fp32 graph it starts from differs too")
    return why


def calibration_feeds(engine: InferenceEngine, items: Sequence[ModelInput]) -> list[Feeds]:
    return [feeds_for(engine, [item]) for item in items]
