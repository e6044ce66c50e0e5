"""A dynamic int8 model batches without a text's answer depending on the batch (per_text_int8.py).

The rule: in a batch, a text gets the per-text graph's answer, the same bits in every batch and
padding; a text whose two top labels are closer than LABEL_GUARD is answered alone, so every label
is the label the text gets alone; the probabilities are close to alone (the probe's bound,
PROBE_TOLERANCE in logits, holds on these texts). Checked on the small fixture model and on the
default model's int8 form of its plain graph, on texts alone and in batches of mixed lengths and company;
the shipped fused int8 form (QAttention quantizes inside the kernel) answers one text at a time.
"""

from __future__ import annotations

import csv
import html
import random
from pathlib import Path

import numpy as np
import pytest

import local_models.engine as engine_module
from local_models.backends import per_text_int8
from local_models.backends.per_text_int8 import PROBE_TOLERANCE, NotRewritable, padded, per_text_graph
from local_models.engine import load_engine
from tests.local_models.test_embeddings import tiny_onnx_dir, tiny_onnx_int8_dir  # noqa: F401  (fixtures)
from tests.model_fixtures import LABELS

MIXED = ["ok", "they are not welcome here", "!!!", "I", "hate",
         "a much longer sentence about the river and the quiet garden in the city " * 4,
         "those people should go back where they came from", "the banana waited near the river",
         "you are a stupid idiot and everyone knows it, really, they all do, every single one of them",
         "women are lovely", "never again ever because why would anyone do that to us 😂"]


def _companies(n: int, seed: int = 0) -> list[list[int]]:
    """Batches of the indices 0..n-1 in different company: all, shuffled, pairs, odd ones with
    repeats, each text beside the longest."""
    rng = random.Random(seed)
    shuffled = list(range(n))
    rng.shuffle(shuffled)
    longest = 5
    return [list(range(n)), shuffled, *[shuffled[k:k + 2] for k in range(0, n, 2)],
            [i for i in range(n) if i % 2] * 2, *[[i, longest] for i in range(n) if i != longest]]


def _alone_logits(engine, texts):
    return [engine.forward(engine.encode([t]))["logits"][0] for t in texts]


def _check_runtime_rule(engine, texts):
    """Every text's logits in every company: the same bits everywhere, within the tolerance of alone."""
    runtime = engine.runtime
    alone = _alone_logits(engine, texts)
    seen: dict[int, np.ndarray] = {}
    for company in _companies(len(texts)):
        batch = engine.encode([texts[i] for i in company])
        logits = runtime.run(batch)["logits"]
        for row, i in enumerate(company):
            assert np.abs(logits[row] - alone[i]).max() <= PROBE_TOLERANCE
            if i in seen:
                assert np.array_equal(seen[i], logits[row])  # the batch changes no bit
            seen[i] = logits[row].copy()
    assert len(seen) == len(texts)


def _check_engine_rule(engine, texts):
    """Labels identical to alone, probabilities within the tolerance, in every company."""
    alone = [engine.predict([t])[0] for t in texts]
    for company in _companies(len(texts)):
        for i, prediction in zip(company, engine.predict([texts[i] for i in company])):
            assert prediction.label == alone[i].label
            for label, p in prediction.probabilities.items():
                assert abs(p - alone[i].probabilities[label]) <= PROBE_TOLERANCE


def _per_text_engine(path, **kwargs):
    """The engine with per-text batches turned on (they are off by default: see OnnxRuntime)."""
    engine = load_engine(path, **kwargs)
    engine.runtime.per_text_batches = True
    return engine


def _per_text_or_skip(engine):
    """The per-text session, or a skip where this CPU's float kernels give a text other bits in a batch than alone
    (the probe refuses the graph there: Intel AMX and AMD EPYC may block a float GEMM differently by its rows).
    Before skipping, the fallback is checked: one text at a time, each answer the bits of the text alone."""
    runtime = engine.runtime
    session = runtime.per_text()
    if session is None and "other bits in a batch" in runtime.batch_rule:
        logits = engine.forward(engine.encode(MIXED))["logits"]
        assert all(np.array_equal(logits[i], a) for i, a in enumerate(_alone_logits(engine, MIXED)))
        pytest.skip(f"per-text batches are refused on this CPU, which keeps one text at a time: {runtime.batch_rule}")
    return session


def test_per_text_batches_are_off_by_default(tiny_onnx_int8_dir):  # noqa: F811
    engine = load_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    assert engine.runtime.row_by_row and engine.runtime.per_text() is None and engine.batch_tolerance == 0.0
    batch = engine.encode(MIXED)
    logits = engine.forward(batch)["logits"]
    assert all(np.array_equal(logits[i], a) for i, a in enumerate(_alone_logits(engine, MIXED)))
    assert engine.runtime._per_text_tried is False  # nothing was built
    engine.close()


def test_the_fixture_int8_model_batches_each_text_as_alone(tiny_onnx_int8_dir):  # noqa: F811
    engine = _per_text_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    runtime = engine.runtime
    assert runtime.row_by_row and _per_text_or_skip(engine) is not None
    assert runtime.batch_rule.startswith("one batch, each text quantized on its own")
    assert engine.batch_tolerance == PROBE_TOLERANCE
    _check_runtime_rule(engine, MIXED)
    _check_engine_rule(engine, MIXED)
    for threads in (1, 2):  # the batch cut in parts for the row pool's threads: the same bits
        runtime.row_threads = threads
        batch = engine.encode(MIXED * 2)
        if threads == 1:
            one = runtime.run(batch)["logits"]
        else:
            assert np.array_equal(one, runtime.run(batch)["logits"])
    engine.close()


def _plain_and_per_text(engine, model_file, texts):
    """(largest move from alone of a plain padded batch, the same of a per-text batch), in logits."""
    import onnx
    import onnxruntime

    session = engine.runtime.session
    batch = engine.encode(texts)
    rows = [{k: v[i:i + 1, :n] for k, v in engine.runtime.feeds(batch).items()} for i, n in enumerate(batch.lengths)]
    alone = [session.run(["logits"], r)[0] for r in rows]
    plain = session.run(["logits"], padded(rows, engine.encoder.pad_token_id))[0]
    rewritten = onnxruntime.InferenceSession(per_text_graph(onnx.load(str(model_file))).SerializeToString(),
                                             sess_options=session.get_session_options())
    per_text = rewritten.run(["logits"], padded(rows, engine.encoder.pad_token_id))[0]
    return (max(float(np.abs(plain[i] - alone[i]).max()) for i in range(len(rows))),
            max(float(np.abs(per_text[i] - alone[i]).max()) for i in range(len(rows))))


def test_why_a_plain_batch_is_not_used(tiny_onnx_int8_dir):  # noqa: F811
    """One activation range for the whole batch: a text's answer moves with its company."""
    engine = load_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    plain, per_text = _plain_and_per_text(engine, tiny_onnx_int8_dir / "model.onnx", MIXED)
    assert plain > 0 and per_text <= PROBE_TOLERANCE
    engine.close()


def test_a_text_near_a_tie_is_answered_alone(tiny_onnx_int8_dir, monkeypatch):  # noqa: F811
    engine = _per_text_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    engine.runtime.per_text()
    monkeypatch.setattr(engine_module, "LABEL_GUARD", 1.01)  # every text counts as close: all alone
    batch = engine.encode(MIXED)
    logits = engine.forward(batch)["logits"]
    assert all(np.array_equal(logits[i], a) for i, a in enumerate(_alone_logits(engine, MIXED)))
    engine.close()


def test_a_graph_the_probe_refuses_keeps_one_text_at_a_time(tiny_onnx_int8_dir, monkeypatch):  # noqa: F811
    """A rewrite that leaves the per-batch range in place fails the probe: batches run row by row."""
    monkeypatch.setattr(per_text_int8, "per_text_graph", lambda model: model)
    engine = _per_text_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    assert engine.runtime.per_text() is None
    assert engine.runtime.batch_rule.startswith("one text at a time: the per-text graph")
    assert engine.batch_tolerance == 0.0
    batch = engine.encode(MIXED)
    logits = engine.forward(batch)["logits"]
    assert all(np.array_equal(logits[i], a) for i, a in enumerate(_alone_logits(engine, MIXED)))
    engine.close()


def test_graphs_the_rewrite_does_not_know_are_refused(tiny_onnx_int8_dir, tiny_onnx_dir):  # noqa: F811
    import onnx

    with pytest.raises(NotRewritable, match="no DynamicQuantizeLinear"):
        per_text_graph(onnx.load(str(tiny_onnx_dir / "model.onnx")))
    model = onnx.load(str(tiny_onnx_int8_dir / "model.onnx"))
    model.graph.node.append(onnx.helper.make_node("DynamicQuantizeMatMul", ["a", "b", "c"], ["d"],
                                                  domain="com.microsoft"))
    with pytest.raises(NotRewritable, match="DynamicQuantizeMatMul"):
        per_text_graph(model)
    unmasked = onnx.load(str(tiny_onnx_int8_dir / "model.onnx"))
    unmasked.graph.input.remove(next(i for i in unmasked.graph.input if i.name == "attention_mask"))
    with pytest.raises(NotRewritable, match="attention mask"):
        per_text_graph(unmasked)


def test_a_float_model_batches_as_before(tiny_onnx_dir):  # noqa: F811
    engine = load_engine(tiny_onnx_dir, task_labels=LABELS, num_threads=1)
    assert not engine.runtime.row_by_row and engine.runtime.per_text() is None and engine.batch_tolerance == 0.0
    engine.close()


# The shipped default model's int8 form ------------------------------------------------------------

def _tweets(n: int) -> list[str]:
    path = Path("/work/shared/data/davidson2017/labeled_data.csv")
    if not path.is_file():
        return MIXED
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [html.unescape(r["tweet"]).strip() for r in csv.DictReader(handle)]
    return random.Random(4).sample([t for t in rows if t], n)


def test_the_shipped_fused_int8_form_answers_one_text_at_a_time_and_says_why(default_model_cache):
    """The default model's int8 form is the fused graph, whose QAttention quantizes its input inside the kernel
    with one range per batch: no per-text rewrite, so a batch runs each text alone and gets its answers exactly."""
    import resources
    from local_models.default_model import prepared_fast_form

    prepared = prepared_fast_form(resources.ROOT / "models" / "hate_speech_r1", default_model_cache)
    assert prepared is not None and prepared.onnx_int8 and prepared.onnx_dir is not None
    engine = _per_text_engine(prepared.onnx_dir, task_labels=["hate", "not hate"], num_threads=1)
    try:
        runtime = engine.runtime
        assert runtime.row_by_row and runtime.per_text() is None
        assert runtime.batch_rule.startswith("one text at a time: QAttention quantize(s) inside the kernel")
        assert runtime.batch_tolerance == 0.0
        texts = MIXED[:6]
        alone = _alone_logits(engine, texts)
        batched = runtime.run(engine.encode(texts))["logits"]
        assert all(np.array_equal(batched[i], alone[i]) for i in range(len(texts)))
    finally:
        engine.close()


@pytest.fixture(scope="module")
def default_int8(default_model_cache, tmp_path_factory):
    """The default model's int8 form on its plain (unfused) graph with the outlier channels of the MatMul inputs
    kept in float: the form it shipped before its fused recipe, and one a candidate's search may choose (no
    fusion, or a fused attempt that fails): the per-text rewrite on a real 6-layer model."""
    import shutil

    from local_models import int8_search
    from local_models.export import export_onnx
    from local_models.int8 import Int8Recipe, build_int8, float_channels_at, input_peaks

    torch_dir = next(default_model_cache.glob("*/torch"))
    root = tmp_path_factory.mktemp("default-plain-int8")
    fp32 = export_onnx(torch_dir, root / "fp32").path
    source = load_engine(torch_dir)
    try:
        feeds = [int8_search.feeds_for(source, [t]) for t in _tweets(int8_search.RANKING_TEXTS)]
    finally:
        source.close()
    ratio = int8_search.FLOAT_CHANNEL_RATIO
    channels = float_channels_at(input_peaks(fp32 / "model.onnx", feeds), ratio, int8_search.FLOAT_CHANNEL_STEPS[0][1])
    assert channels  # the model has outlier channels, which the form keeps in float
    folder = shutil.copytree(fp32, root / "int8")
    build_int8(fp32 / "model.onnx", folder / "model.onnx",
               Int8Recipe("dynamic", float_channels=channels, float_channel_ratio=ratio))
    engine = _per_text_engine(folder, task_labels=["hate", "not hate"], num_threads=1)
    try:
        _per_text_or_skip(engine)
    except BaseException:
        engine.close()
        raise
    yield engine
    engine.close()


def test_the_default_models_plain_int8_form_batches_each_text_as_alone(default_int8):
    runtime = default_int8.runtime
    assert runtime.row_by_row and runtime.per_text() is not None, runtime.batch_rule
    texts = MIXED + _tweets(13)
    plain, per_text = _plain_and_per_text(default_int8, Path(runtime.path) / "model.onnx", texts)
    assert plain > 0.01 and per_text <= PROBE_TOLERANCE  # a plain batch would move answers visibly
    _check_runtime_rule(default_int8, texts)
    _check_engine_rule(default_int8, texts)


def test_ablation_on_the_default_models_plain_int8_form_matches_one_text_at_a_time(default_int8):
    runtime = default_int8.runtime
    texts = ["those people are vermin and should leave", "You are a stupid idiot and everyone knows it lol 😂",
             *_tweets(4)]
    batched = [default_int8.attribute(t, method="ablation") for t in texts]
    runtime.per_text_batches = False
    try:
        alone = [default_int8.attribute(t, method="ablation") for t in texts]
        predicted = [default_int8.predict([t])[0] for t in texts]
    finally:
        runtime.per_text_batches = True
    for b, a, p in zip(batched, alone, predicted):
        assert (b.target, b.predicted) == (a.target, a.predicted) == (p.label, p.label)
        assert b.target_probability == a.target_probability == p.probabilities[p.label]  # the text itself alone
        assert [(w.text, w.start, w.end) for w in b.words] == [(w.text, w.start, w.end) for w in a.words]
        assert max(abs(x.raw - y.raw) for x, y in zip(b.words, a.words)) <= PROBE_TOLERANCE


def test_the_assistants_check_on_the_default_models_plain_int8_form_matches_each_text_alone(default_int8):
    import resources
    from app.core.assist.pipeline import check
    from app.core.assist.types import Candidate, Generator, Goal
    from app.core.tasks.definition import load_task_file
    from local_models.engine import Ensemble

    definition = load_task_file(resources.ROOT / "tasks" / "hate_speech.yaml")
    text = "those people are vermin and should leave"
    variants = [text.replace("vermin", w) for w in ("v3rmin", "rats", "friends", "ok", "neighbours")] + \
        [text + " now", "those people", text.upper(), *_tweets(40)]
    candidates = [Candidate(v, Generator.OBFUSCATION, "test") for v in dict.fromkeys(variants)]
    models = Ensemble([default_int8])
    original, checked = check(models, definition, text, 0, candidates, goal=Goal.FOOL, writer_label="hate", chunk=16)
    assert original.probabilities == default_int8.predict([text])[0].probabilities
    for suggestion in checked:
        alone = default_int8.predict([suggestion.candidate.text])[0]
        assert suggestion.predicted == alone.label
        assert abs(suggestion.probabilities["hate"] - alone.probabilities["hate"]) <= PROBE_TOLERANCE
