"""A row-by-row (dynamic int8) batch runs its texts on two threads: the same answers, bit for bit
(one text at a time, or the per-text graph's batch cut in two parts)."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from local_models.backends.row_pool import RowPool, thread_niceness
from local_models.engine import load_engine
from tests.local_models.test_embeddings import tiny_onnx_dir, tiny_onnx_int8_dir  # noqa: F401  (fixtures)
from tests.model_fixtures import LABELS

EXPECTED_ROW_THREADS = 2 if (os.cpu_count() or 1) >= 2 else 1  # a second core takes every other text

# mixed lengths: 1 to ~60 tokens, a repeat, an empty-ish text
MIXED = ["ok", "they are not welcome here", "ok", "!!!",
         "a much longer sentence about the river and the quiet garden in the city " * 4,
         "those people should go back where they came from", "I", "hate", "the banana waited near the river",
         "you are a stupid idiot and everyone knows it, really, they all do, every single one of them"]


class _RecordingSession:
    """Delegates to the real session; notes which thread ran each text, slowly enough that both do."""

    def __init__(self, session):
        self.session = session
        self.threads: list[int] = []

    def run(self, names, feeds):
        self.threads.append(threading.get_ident())
        time.sleep(0.004)
        return self.session.run(names, feeds)


def _answers(engine, texts, threads: int):
    engine.runtime.row_threads = threads
    batch = engine.encode(texts)
    logits = engine.forward(batch)["logits"]
    return logits, [p.probabilities for p in engine.predict(texts)]


def test_two_threads_give_the_fixture_int8_models_answers_bit_for_bit(tiny_onnx_int8_dir):  # noqa: F811
    engine = load_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    runtime = engine.runtime
    # one text at a time (the default; test_per_text_batches.py covers per-text batches, which
    # share the pool)
    runtime.per_text_batches = False
    assert runtime.row_by_row and runtime.row_threads == EXPECTED_ROW_THREADS  # one intra-op thread each
    texts = MIXED * 3
    one_logits, one = _answers(engine, texts, 1)
    two_logits, two = _answers(engine, texts, 2)
    assert one_logits.dtype == two_logits.dtype and np.array_equal(one_logits, two_logits)
    assert one == two
    assert one[0] == engine.predict([texts[0]])[0].probabilities  # and as a keystroke answers it
    assert all(one[i] == engine.predict([text])[0].probabilities for i, text in enumerate(MIXED))

    recording = _RecordingSession(runtime.session)
    runtime.session = recording
    try:
        again, _ = _answers(engine, texts, 2)
    finally:
        runtime.session = recording.session
    assert np.array_equal(again, one_logits)
    # a text that comes twice runs once (forward, then predict); both threads worked
    assert len(recording.threads) == 2 * len(set(texts)) < 2 * len(texts) and len(set(recording.threads)) == 2
    assert threading.get_ident() in recording.threads  # the caller is one of them

    pool = runtime.row_pool()
    assert pool.helper_threads()
    engine.close()
    assert pool.closed and not pool.helper_threads()  # the pool goes with the runtime


def test_a_single_text_runs_on_the_callers_thread_only(tiny_onnx_int8_dir):  # noqa: F811
    engine = load_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=1)
    recording = _RecordingSession(engine.runtime.session)
    engine.runtime.session = recording
    engine.predict(["they are not welcome here"])
    assert recording.threads == [threading.get_ident()]
    assert engine.runtime._rows is None  # a keystroke's prediction never starts the pool
    engine.runtime.session = recording.session
    engine.close()


def test_more_intra_op_threads_or_a_float_model_keep_one_thread(tiny_onnx_int8_dir, tiny_onnx_dir):  # noqa: F811
    several = load_engine(tiny_onnx_int8_dir, task_labels=LABELS, num_threads=2)
    float_model = load_engine(tiny_onnx_dir, task_labels=LABELS, num_threads=1)
    assert several.runtime.row_threads == 1 and float_model.runtime.row_threads == 1
    several.close()
    float_model.close()


def test_the_default_models_int8_form_answers_alike_on_one_and_two_threads(default_model_cache):
    import resources
    from local_models.default_model import prepared_fast_form

    prepared = prepared_fast_form(resources.ROOT / "models" / "hate_speech_r1", default_model_cache)
    assert prepared is not None and prepared.onnx_dir is not None
    engine = load_engine(prepared.onnx_dir, task_labels=["hate", "not hate"], num_threads=1)
    assert engine.runtime.row_by_row and engine.runtime.row_threads == EXPECTED_ROW_THREADS
    texts = MIXED * 2
    one_logits, one = _answers(engine, texts, 1)
    two_logits, two = _answers(engine, texts, 2)
    assert np.array_equal(one_logits, two_logits) and one == two
    engine.close()


def test_the_pool_keeps_order_raises_a_rows_error_and_runs_on_the_caller_once_closed():
    pool = RowPool(2)
    assert pool.map(lambda i: i * i, 50) == [i * i for i in range(50)]

    def fails_at_seven(i):
        if i == 7:
            raise ValueError("row 7")
        return i

    with pytest.raises(ValueError, match="row 7"):
        pool.map(fails_at_seven, 20)
    pool.close()
    ran_on = set()
    assert pool.map(lambda i: ran_on.add(threading.get_ident()) or i, 5) == [0, 1, 2, 3, 4]
    assert ran_on == {threading.get_ident()}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")
def test_helpers_run_at_the_callers_niceness():
    """The assistant's check comes from the niced explanation lane: its helper must not take a core
    from keystroke predictions at normal priority, and a normal caller's helper stays normal."""
    pool = RowPool(2)
    seen: dict[str, set[int]] = {}

    def run(name: str, raise_by: int) -> None:
        if raise_by:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), thread_niceness() + raise_by)

        def row(i):
            time.sleep(0.003)
            return thread_niceness()

        seen[name] = set(pool.map(row, 30))

    for name, raise_by in (("niced", 5), ("normal", 0)):
        worker = threading.Thread(target=run, args=(name, raise_by))
        worker.start()
        worker.join()
    base = thread_niceness()
    assert seen["niced"] == {base + 5} and seen["normal"] == {base}
    pool.close()
