"""The engine: predictions for texts and pairs, batches with progress and cancel, ensembles,
extractive QA spans, and inputs that are empty, huge or full of emoji."""

from __future__ import annotations

import pytest

from local_models.engine import Ensemble, load_engine
from local_models.errors import Cancelled, LabelMismatch, UnsupportedModel
from local_models.progress import Progress
from tests.model_fixtures import LABELS


@pytest.fixture(scope="module")
def engine(tiny_classifier_dir):
    return load_engine(tiny_classifier_dir, task_labels=LABELS, num_threads=1)


TRICKY = ["", "ok", "I ❤️ you 👨\u200d👩\u200d👧", "n\u200bice w\u200dork", "שלום עולם مرحبا", "sh!t h4pp3n5 @ss",
          "word " * 500]


def test_predictions_name_their_model_and_sum_to_one(engine):
    predictions = engine.predict(TRICKY)
    assert len(predictions) == len(TRICKY)
    for p in predictions:
        assert p.label in LABELS and set(p.probabilities) == set(LABELS)
        assert sum(p.probabilities.values()) == pytest.approx(1.0)
        assert p.label == max(p.probabilities, key=p.probabilities.get)
        assert p.model_sha == engine.sha256 and p.latency_ms > 0
    assert [p.truncated for p in predictions] == [False] * 6 + [True]
    assert predictions[-1].seen_chars[0] == len("word " * 62) - 1  # 64 tokens: [CLS] + 62 words + [SEP]


def test_batching_and_padding_do_not_change_answers(engine):
    together = engine.predict(TRICKY)
    alone = [engine.predict_one(text) for text in TRICKY]
    for a, b in zip(together, alone):
        assert a.probabilities["hate"] == pytest.approx(b.probabilities["hate"], abs=1e-5)


def test_predict_wants_a_list(engine):
    with pytest.raises(TypeError):
        engine.predict("a single text")
    assert engine.predict([]) == []


def test_batched_prediction_keeps_order_reports_progress_and_cancels(engine):
    texts = [f"text number {i} " + "x " * (i % 7) for i in range(50)]
    reports = []
    batched = engine.predict_batched(texts, batch_size=8, progress=Progress(lambda d, t: reports.append((d, t))))
    direct = engine.predict(texts)
    assert [p.probabilities["hate"] for p in batched] == pytest.approx([p.probabilities["hate"] for p in direct], abs=1e-5)
    assert reports[0] == (0, 50) and reports[-1] == (50, 50) and len(reports) == 1 + 7

    seen = []

    def cancel_after_two_batches(done, total):
        seen.append(done)
        if len(seen) == 3:
            progress.cancel()

    progress = Progress(cancel_after_two_batches)
    with pytest.raises(Cancelled, match="16 of 50"):
        engine.predict_batched(texts, batch_size=8, progress=progress)


def test_ensemble_gives_members_and_their_mean(tiny_classifier_dir, trigger_model_dir, tmp_path):
    from transformers import BertForSequenceClassification

    from tests.model_fixtures import save_tiny

    other = save_tiny(BertForSequenceClassification, tmp_path / "other", seed=7, num_labels=2,
                      id2label={0: "not hate", 1: "hate"}, label2id={"not hate": 0, "hate": 1})
    a = load_engine(tiny_classifier_dir, task_labels=LABELS)
    b = load_engine(other, task_labels=LABELS)
    ensemble = Ensemble([a, b])
    [result] = ensemble.predict(["hello there"])
    assert [m.model_sha for m in result.members] == [a.sha256, b.sha256]
    for label in LABELS:
        assert result.probabilities[label] == pytest.approx(
            (result.members[0].probabilities[label] + result.members[1].probabilities[label]) / 2)
    assert result.label == max(LABELS, key=result.probabilities.get)
    progress_seen = []
    batched = ensemble.predict_batched(["a", "b", "c"], batch_size=2,
                                       progress=Progress(lambda d, t: progress_seen.append((d, t))))
    assert len(batched) == 3 and progress_seen[-1] == (6, 6)
    with pytest.raises(LabelMismatch, match="different labels"):
        Ensemble([a, load_engine(trigger_model_dir)])


def test_extractive_qa_answers_with_a_span_of_the_context(tiny_qa_dir):
    engine = load_engine(tiny_qa_dir)
    assert engine.kind == "extractive-qa" and engine.labels == []
    context = "Marie Curie 👩‍🔬 won two Nobel prizes, in 1903 and in 1911, for physics and chemistry."
    [p] = engine.predict([("When did she win?", context)])
    assert p.answer is not None and p.label == p.answer.text
    assert context[p.answer.start:p.answer.end] == p.answer.text and p.answer.text
    assert 0 < p.answer.score <= 1
    with pytest.raises(UnsupportedModel, match="spans, not labels"):
        engine.label_probabilities(engine.encode([("q", context)]))


def test_extractive_qa_truncates_the_context_not_the_question(tiny_qa_dir):
    engine = load_engine(tiny_qa_dir)
    context = "filler words here " * 100 + "the answer"
    [p] = engine.predict([("what is the answer?", context)])
    assert p.truncated and p.seen_chars[0] == len("what is the answer?") and p.seen_chars[1] < len(context)
    assert p.answer.end <= p.seen_chars[1]
    ensemble = Ensemble([engine])
    [result] = ensemble.predict([("q?", "a short context")])
    assert result.probabilities == {} and result.label is None and result.members[0].answer is not None
