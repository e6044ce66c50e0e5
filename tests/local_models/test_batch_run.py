"""Batched prediction: inputs in length order, batches bounded by count and by padded tokens,
results in the caller's order."""

from __future__ import annotations

import pytest

from local_models.batch_run import BatchRun
from local_models.engine import load_engine


@pytest.fixture(scope="module")
def engine(tiny_classifier_dir):
    return load_engine(tiny_classifier_dir, num_threads=1)


def test_batches_are_bounded_by_count_and_by_padded_tokens():
    run = BatchRun(object(), batch_size=4, max_batch_tokens=12)
    lengths = [1, 1, 1, 1, 1, 2, 3, 3, 5, 6, 13]
    order = list(range(len(lengths)))
    batches = run.batches(order, lengths)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10]]  # 13 alone: one input at least
    assert [i for b in batches for i in b] == order
    for batch in batches:
        assert len(batch) <= 4 and (len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 12)
    assert BatchRun(object(), batch_size=3).batches(order, lengths) == [order[0:3], order[3:6], order[6:9], order[9:]]
    with pytest.raises(ValueError, match="max_batch_tokens"):
        BatchRun(object(), max_batch_tokens=0)


def test_dynamic_batches_answer_in_the_callers_order(engine):
    texts = ["a much longer text about the weather in the city today " * 3, "short", "a middling text here", "hi"]
    expected = [engine.predict_one(t).probabilities for t in texts]
    calls = []
    predict = engine.predict

    class Recording:
        encoder = engine.encoder

        def predict(self, items):
            calls.append(list(items))
            return predict(items)

    outputs, stats = BatchRun(Recording(), batch_size=8, max_batch_tokens=16, latency_samples=0).run(texts)
    assert [o.probabilities for o in outputs] == [pytest.approx(e, abs=1e-5) for e in expected]
    assert calls[0][0] in ("short", "hi") and calls[-1] == [texts[0]]  # shortest first; the long one alone
    assert sum(len(c) for c in calls) == len(texts) and stats.items == len(texts)
