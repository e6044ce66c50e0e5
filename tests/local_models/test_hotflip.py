"""The gradient pass: the gradient toward the predicted label from the same forward pass is the
one a pass of its own gives (bit for bit from a second backward; for two labels, derived from the
first without one, to float rounding and with the same order of words), and the pass leaves the
model's weights without gradients."""

from __future__ import annotations

import pytest
import torch

from local_models import hotflip
from local_models.engine import load_engine
from local_models.hotflip import first_order

LABELS = ["hate", "not hate"]
BANANA = "my old banana waited near the river today"  # the trigger model says "hate"
PLAIN = "my old friend waited near the river today"


@pytest.fixture(scope="module")
def model(hate_trigger_model_dir):
    engine = load_engine(hate_trigger_model_dir, task_labels=LABELS)
    yield engine
    engine.close()


@pytest.mark.parametrize("text", [BANANA, PLAIN])
def test_the_second_backward_gives_the_predicted_labels_own_pass_bit_for_bit(model, text, monkeypatch):
    monkeypatch.setattr(hotflip, "_two_labels", lambda head: False)  # as for a model of three labels
    predicted = model.predict_one(text).label
    other = next(label for label in LABELS if label != predicted)
    aimed = first_order(model, text, target=other, also_predicted=True)
    assert aimed.target == other and aimed.predicted == predicted
    own = first_order(model, text, target=predicted)
    toward = aimed.toward_predicted
    assert toward is not None and toward.target == predicted
    assert torch.equal(toward.gradient, own.gradient) and torch.equal(toward.per_token, own.per_token)
    assert toward.target_probability == own.target_probability and toward.units == own.units
    assert toward.word_scores() == own.word_scores()
    # the aimed pass is the one made without asking for the second
    alone = first_order(model, text, target=other)
    assert torch.equal(aimed.gradient, alone.gradient) and alone.toward_predicted is None
    # two labels: the gradients point opposite ways (log p and log(1 - p))
    assert float(torch.nn.functional.cosine_similarity(aimed.gradient.flatten(), own.gradient.flatten(), dim=0)) \
        < -0.99


@pytest.mark.parametrize("text", [BANANA, PLAIN])
def test_two_labels_derive_the_predicted_labels_gradient_without_a_second_backward(model, text, monkeypatch):
    assert hotflip._two_labels(model.head)
    predicted = model.predict_one(text).label
    other = next(label for label in LABELS if label != predicted)
    backwards = []
    grad = torch.autograd.grad
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: backwards.append(1) or grad(*a, **k))
    aimed = first_order(model, text, target=other, also_predicted=True)
    assert len(backwards) == 1
    own = first_order(model, text, target=predicted)
    toward = aimed.toward_predicted
    assert toward is not None and toward.target == predicted and toward.units == own.units
    assert toward.target_probability == own.target_probability
    scale = float(own.gradient.abs().max())
    assert torch.allclose(toward.gradient, own.gradient, rtol=1e-4, atol=1e-5 * scale)
    derived, alone = toward.word_scores(), own.word_scores()
    assert max(abs(a[1] - b[1]) for a, b in zip(derived, alone)) < 1e-4
    assert [u for u, _ in sorted(derived, key=lambda w: w[1])] == [u for u, _ in sorted(alone, key=lambda w: w[1])]


def test_no_second_backward_when_the_pass_aims_at_the_predicted_label(model):
    predicted = model.predict_one(BANANA).label
    assert first_order(model, BANANA, target=predicted, also_predicted=True).toward_predicted is None
    assert first_order(model, BANANA, also_predicted=True).toward_predicted is None


def test_the_pass_computes_no_weight_gradients(model):
    first_order(model, BANANA, target="not hate", also_predicted=True)
    parameters = list(model.runtime.module.parameters())
    assert parameters and not any(p.requires_grad for p in parameters)
    assert all(p.grad is None for p in parameters)
