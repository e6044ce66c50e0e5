"""Gradient-guided word substitution (HotFlip, Ebrahimi et al. 2018), the torch part.

One forward and backward pass gives the gradient g of the target label's log probability at
every input embedding. Replacing a word's tokens (embeddings e_1..e_k, gradients g_1..g_k) by one
vocabulary word v changes it, to first order, by

    Δ(v) = e_v · g_1 − Σ_i e_i · g_i

(the exact HotFlip estimate (e_v − e_1) · g_1 for a one-token word). The most negative Δ are the
replacements expected to lower the target's probability most. They are estimates: the caller
confirms each by a forward pass. Only whole words qualify: vocabulary entries that are
alphabetic, at least two letters, not word pieces ("##s"), not special or unused tokens.
Needs a model with gradients (PyTorch); ONNX forms raise ``UnsupportedOperation``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from local_models.errors import UnsupportedOperation
from local_models.heads import ClassificationHead
from local_models.tokenization import ModelInput
from local_models.words import WordUnit, group_tokens

if TYPE_CHECKING:
    from local_models.backends.hf_torch import TorchRuntime
    from local_models.engine import InferenceEngine


@dataclass(frozen=True)
class Replacement:
    word: str  # a whole vocabulary word (as the vocabulary spells it: lower case for uncased models)
    estimate: float  # first-order change of the target's log probability (negative: it drops)


@dataclass(frozen=True)
class WordReplacements:
    segment: int
    text: str  # the word in the input
    start: int
    end: int
    saliency: float  # |Σ e_i · g_i|: how much the word's embeddings matter to the target, to first order
    replacements: tuple[Replacement, ...]  # best first


@dataclass(frozen=True)
class FlipResult:
    target: str
    target_probability: float
    predicted: str
    words: tuple[WordReplacements, ...]


@dataclass(frozen=True)
class _Vocabulary:
    ids: Any  # torch.LongTensor of whole-word ids
    words: tuple[str, ...]
    embeddings: Any  # [words, hidden] float32: their input embeddings, copied once


_VOCABULARIES: weakref.WeakKeyDictionary[Any, _Vocabulary] = weakref.WeakKeyDictionary()
_VOCABULARY_LOCK = threading.Lock()


def is_whole_word(token: str) -> bool:
    return len(token) >= 2 and token.isalpha() and not token.startswith("##")


def whole_word_vocabulary(engine: InferenceEngine) -> _Vocabulary:
    """The model's whole-word tokens, once per loaded module."""
    import torch

    runtime = cast("TorchRuntime", engine.runtime)
    with _VOCABULARY_LOCK:
        found = _VOCABULARIES.get(runtime.module)
        if found is not None:
            return found
        vocab = engine.encoder.vocabulary()
        size = int(runtime.embedding_layer().weight.shape[0])
        special = engine.encoder.special_tokens()
        pairs = sorted((i, t) for t, i in vocab.items() if i < size and t not in special and is_whole_word(t))
        ids = torch.tensor([i for i, _ in pairs], dtype=torch.long)
        weights = runtime.embedding_layer().weight.detach()
        found = _Vocabulary(ids, tuple(t for _, t in pairs), weights[ids.to(weights.device)].float().contiguous())
        _VOCABULARIES[runtime.module] = found
        return found


@dataclass(frozen=True)
class FirstOrder:
    """One forward and backward pass: the gradient of ``target``'s log probability at every input
    embedding of one input, and what maps it back to the words of its text ``segment``."""

    target: str
    target_probability: float
    predicted: str
    segment: int
    units: tuple[WordUnit, ...]  # the words of the text the model read
    gradient: Any  # [tokens, hidden] float32
    per_token: Any  # [tokens]: e_i · g_i
    # the same pass's gradient of the predicted label's log probability, when asked for and the
    # predicted label is not ``target`` (a second backward through the same forward)
    toward_predicted: FirstOrder | None = None

    def word_scores(self) -> list[tuple[WordUnit, float]]:
        """Gradient × input per word (Σ e_i · g_i over its tokens): positive when the word pushes
        toward the target, to first order. Scaled so that the strongest word is ±1."""
        raw = [float(self.per_token[list(u.token_positions)].sum()) for u in self.units]
        scale = max((abs(r) for r in raw), default=0.0)
        return [(u, r / scale if scale > 0 else 0.0) for u, r in zip(self.units, raw)]


def first_order(engine: InferenceEngine, item: ModelInput, *, segment: int = 0,
                target: str | None = None, also_predicted: bool = False) -> FirstOrder:
    """The gradient pass for ``target`` (default: the predicted label) on ``item``.

    ``also_predicted``: where the model predicts another label than ``target``, also the gradient
    toward the predicted label (``toward_predicted``), from the same forward pass: the one
    ``first_order(..., target=predicted)`` gives. A model of two classes, one per label, needs no
    second backward (``_two_labels``); any other costs one."""
    import torch

    from local_models.attribution import _embedding_override

    if not engine.supports_gradients:
        raise UnsupportedOperation(f"{engine.name} ({engine.format}) has no gradients; word substitution "
                                   "needs its PyTorch form.")
    if not isinstance(engine.head, ClassificationHead):
        raise UnsupportedOperation(f"Word substitution explains labels; {engine.name} answers with spans.")
    runtime = cast("TorchRuntime", engine.runtime)
    head = engine.head
    module = runtime.module
    layer = runtime.embedding_layer()
    batch = engine.encode([item])
    texts = batch.segments(0)
    units = tuple(u for u in group_tokens(texts[segment], segment, batch.segment_offsets(0, segment)) if u.seen)
    feeds = runtime.feeds(batch)
    input_ids = feeds.pop("input_ids")
    columns = torch.tensor(head._columns, dtype=torch.float32, device=module.device)
    override = _embedding_override(layer)  # this thread only: a prediction elsewhere runs untouched
    second = None
    try:
        with torch.enable_grad():
            embedded = layer(input_ids).detach().requires_grad_(True)
            override.points = embedded
            logits = module(input_ids=input_ids, **feeds).logits
            probabilities = torch.softmax(logits.float(), dim=-1) @ columns
            predicted = int(probabilities[0].argmax())
            index = predicted if target is None else engine.labels.index(target)
            also = also_predicted and predicted != index
            objective = torch.log(probabilities[0, index].clamp_min(1e-12))
            derived = also and _two_labels(head) and float(probabilities[0].min()) > MIN_DERIVED_PROBABILITY
            (gradient,) = torch.autograd.grad(objective, embedded, retain_graph=also and not derived)
            if derived:
                # two labels: log p and log(1 - p) of one logit difference d have gradients (1 - p) grad d
                # and -p grad d, so the predicted label's is the target's times -p_target / p_predicted
                second = gradient * -(probabilities[0, index] / probabilities[0, predicted]).detach()
            elif also:
                (second,) = torch.autograd.grad(torch.log(probabilities[0, predicted].clamp_min(1e-12)), embedded)
    finally:
        override.points = None
    embedded = embedded[0].detach().float()
    probs = probabilities[0].detach().cpu().numpy()

    def result(index: int, gradient: Any, toward_predicted: FirstOrder | None = None) -> FirstOrder:
        gradient = gradient[0].detach().float()
        return FirstOrder(engine.labels[index], float(probs[index]), engine.labels[int(probs.argmax())], segment,
                          units, gradient, (gradient * embedded).sum(dim=-1), toward_predicted)

    return result(index, gradient, None if second is None else result(predicted, second))


# Below this a label's log probability is clamped (its gradient is zero), so the second backward runs
MIN_DERIVED_PROBABILITY = 1e-9


def _two_labels(head: ClassificationHead) -> bool:
    """Two model classes, one per task label: each label's probability is the other's complement."""
    columns = head._columns
    return columns.shape == (2, 2) and bool(((columns == 0) | (columns == 1)).all()) \
        and bool((columns.sum(axis=0) == 1).all()) and bool((columns.sum(axis=1) == 1).all())


def hotflip(engine: InferenceEngine, item: ModelInput, *, segment: int = 0, target: str | None = None,
            spans: Sequence[tuple[int, int]] | None = None, top_words: int = 4, per_word: int = 6,
            exclude: Sequence[str] = (), gradients: FirstOrder | None = None) -> FlipResult:
    """Replacement words for words of ``item``'s text ``segment``, ranked by their first-order
    effect on ``target``'s log probability (default: the predicted label).

    ``spans``: the words to replace (character spans in that text, best first); without them,
    the ``top_words`` most salient words by |Σ e·g|. ``exclude``: words neither replaced nor
    proposed (lower-cased compare), e.g. stopwords. ``gradients``: this input's ``first_order`` pass when
    the caller already made it (for the same target), so that it is not made twice.
    """
    import torch

    if gradients is None or gradients.segment != segment or (target is not None and gradients.target != target):
        gradients = first_order(engine, item, segment=segment, target=target)
    vocabulary = whole_word_vocabulary(engine)
    result = FlipResult(gradients.target, gradients.target_probability, gradients.predicted, ())
    excluded = {w.lower() for w in exclude}
    chosen = _choose([u for u in gradients.units if u.text.lower() not in excluded], spans, gradients.per_token,
                     top_words)
    if not chosen:
        return result
    per_token, gradient = gradients.per_token, gradients.gradient
    firsts = torch.stack([gradient[u.token_positions[0]] for u in chosen])  # [W, d]
    constants = torch.stack([per_token[list(u.token_positions)].sum() for u in chosen])  # [W]
    with torch.inference_mode():
        estimates = vocabulary.embeddings @ firsts.T - constants  # [V, W]
    out = []
    # enough of the best to fill ``per_word`` after the word itself and the excluded ones are skipped
    depth = min(len(vocabulary.words), per_word + len(excluded) + 1)
    best_values, best_rows = torch.topk(estimates, depth, dim=0, largest=False)
    best_values, best_rows = best_values.cpu().numpy(), best_rows.cpu().numpy()
    for k, unit in enumerate(chosen):
        own = unit.text.lower()
        picks: list[Replacement] = []
        for value, row in zip(best_values[:, k], best_rows[:, k]):
            if value >= 0:
                break  # ascending: nothing further lowers the target
            word = vocabulary.words[int(row)]
            if word == own or word in excluded:
                continue
            picks.append(Replacement(word, float(value)))
            if len(picks) >= per_word:
                break
        out.append(WordReplacements(segment, unit.text, unit.start, unit.end, float(abs(constants[k])), tuple(picks)))
    return FlipResult(result.target, result.target_probability, result.predicted, tuple(out))


def _choose(units: list[WordUnit], spans: Sequence[tuple[int, int]] | None, per_token: Any,
            top_words: int) -> list[WordUnit]:
    words = [u for u in units if is_whole_word(u.text.lower()) or any(ch.isalpha() for ch in u.text)]
    if spans is not None:
        by_span = {(u.start, u.end): u for u in words}
        picked = [by_span[s] for s in spans if s in by_span][:top_words]
        if picked:
            return picked  # else: the spans name no word the model read; fall back to saliency
    saliency = np.array([abs(float(per_token[list(u.token_positions)].sum())) for u in words])
    return [words[k] for k in np.argsort(-saliency, kind="stable")[:top_words]]
