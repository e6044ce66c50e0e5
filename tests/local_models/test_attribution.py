"""Attributions: one signed, normalised score per word of the exact text, from gradients or
from ablation; on a model where one word provably drives the output, that word comes first."""

from __future__ import annotations

import pytest

from local_models.attribution import DEFAULT_IG_STEPS, METHODS, MIN_FULL_SCALE, full_colour_scale
from local_models.engine import load_engine
from local_models.errors import UnsupportedOperation
from tests.model_fixtures import TRIGGER, trigger_sentences

SENTENCES = ["my old neighbour walked near the banana river today",
             "banana",
             "the doctor read a small banana slowly",
             "teacher smiled: banana! 🍌 always"]


@pytest.fixture(scope="module")
def trigger(trigger_model_dir):
    return load_engine(trigger_model_dir, num_threads=1)


def test_the_trigger_word_provably_drives_the_model(trigger):
    """The premise of the tests below, checked rather than assumed: on held-out sentences the
    label is exactly 'contains banana', and removing the word flips the prediction."""
    rows = trigger_sentences(200, seed=99)
    predictions = trigger.predict([text for text, _ in rows])
    assert [p.label for p in predictions] == [label for _, label in rows]
    for text in SENTENCES[:3]:
        assert trigger.predict_one(text).label == "fruit"
        assert trigger.predict_one(text.replace(TRIGGER, "").replace("  ", " ")).label == "plain"


@pytest.mark.parametrize("method", ["gradients", "ablation"])
@pytest.mark.parametrize("text", SENTENCES)
def test_the_driving_word_gets_the_largest_score(trigger, method, text):
    attribution = trigger.attribute(text, method=method)
    assert attribution.method == method and attribution.target == "fruit" == attribution.predicted
    top = max(attribution.words, key=lambda w: abs(w.score))
    assert top.text == TRIGGER and top.score == pytest.approx(1.0)
    assert text[top.start:top.end] == TRIGGER
    assert all(-1.0 <= w.score <= 1.0 for w in attribution.words)


def test_scores_are_signed_for_or_against_the_target(trigger):
    text = "the doctor read a small banana slowly"
    for method in ("gradients", "ablation"):
        towards = trigger.attribute(text, method=method, target="fruit")
        against = trigger.attribute(text, method=method, target="plain")
        banana_for = next(w for w in towards.words if w.text == TRIGGER)
        banana_against = next(w for w in against.words if w.text == TRIGGER)
        assert banana_for.score > 0 > banana_against.score
        assert banana_for.raw == pytest.approx(-banana_against.raw, rel=0.05, abs=1e-4)


def test_both_methods_cover_the_same_words_of_the_exact_text(trigger):
    text = "I ❤️ my neighbour's banana 👨\u200d👩\u200d👧, n\u200bice!"
    grads = trigger.attribute(text, method="gradients")
    ablation = trigger.attribute(text, method="ablation")
    assert [(w.text, w.start, w.end) for w in grads.words] == [(w.text, w.start, w.end) for w in ablation.words]
    for w in grads.words:
        assert text[w.start:w.end] == w.text
    assert [w.text for w in grads.words] == ["I", "❤️", "my", "neighbour's", "banana", "👨\u200d👩\u200d👧", ",",
                                             "n\u200bice", "!"]


def test_gradients_report_steps_and_convergence(trigger):
    default = trigger.attribute("the doctor read a banana", method="gradients")
    assert default.n_steps == DEFAULT_IG_STEPS and default.convergence_delta is not None
    finer = trigger.attribute("the doctor read a banana", method="gradients", n_steps=64)
    assert finer.n_steps == 64 and finer.convergence_delta <= default.convergence_delta + 1e-6


def test_ablation_runs_on_onnx_and_agrees_with_torch(trigger, trigger_onnx_dir):
    onnx = load_engine(trigger_onnx_dir, num_threads=1)
    text = "my old neighbour walked near the banana river today"
    on_onnx = onnx.attribute(text)  # auto: ONNX has no gradients, so ablation
    on_torch = trigger.attribute(text, method="ablation")
    assert on_onnx.method == "ablation"
    assert [w.raw for w in on_onnx.words] == pytest.approx([w.raw for w in on_torch.words], abs=1e-4)
    with pytest.raises(UnsupportedOperation, match="cannot give gradients"):
        onnx.attribute(text, method="gradients")


def test_masking_instead_of_removing(trigger):
    attribution = trigger.attribute("the doctor read a banana", method="ablation", mode="mask")
    assert attribution.details == {"mode": "mask"}
    assert max(attribution.words, key=lambda w: abs(w.score)).text == TRIGGER


def test_words_beyond_the_model_s_reach_are_marked_unseen(trigger):
    text = "banana " + "river " * 60
    attribution = trigger.attribute(text, method="ablation")
    assert attribution.truncated
    assert attribution.words[0].seen and not attribution.words[-1].seen and attribution.words[-1].score == 0.0
    assert len(attribution.words) == 61  # every word of the text is listed, read or not


def test_pairs_can_limit_scores_to_one_segment(tiny_classifier_dir):
    engine = load_engine(tiny_classifier_dir)
    attribution = engine.attribute(("a given context", "the written hypothesis"), method="ablation", segments=[1])
    assert [(w.segment, w.text) for w in attribution.words] == [(1, "the"), (1, "written"), (1, "hypothesis")]


def test_empty_text_has_no_words_but_still_a_prediction(trigger):
    for method in METHODS:
        attribution = trigger.attribute("", method=method)
        assert attribution.words == () and attribution.predicted in ("fruit", "plain")


def test_refusals(trigger, tiny_qa_dir):
    with pytest.raises(UnsupportedOperation, match="not a label"):
        trigger.attribute("x", target="hate")
    with pytest.raises(UnsupportedOperation, match="Unknown attribution method"):
        trigger.attribute("x", method="shap")
    with pytest.raises(UnsupportedOperation, match="spans"):
        load_engine(tiny_qa_dir).attribute(("q", "c"))
    with pytest.raises(TypeError, match="unknown option"):
        trigger.attribute("x", method="ablation", n_steps=3)


def test_full_colour_is_an_absolute_effect_so_weak_words_stay_pale():
    """A 0.017 change in probability must not get the colour of the strongest possible effect."""
    assert full_colour_scale([0.017, -0.004]) == MIN_FULL_SCALE == 0.2
    assert 0.017 / full_colour_scale([0.017, -0.004]) < 0.1  # pale, not ±1
    assert full_colour_scale([0.1, -0.9]) == pytest.approx(0.9)  # a strong word is at full colour
    assert full_colour_scale([]) == MIN_FULL_SCALE


def test_the_attribution_says_its_scale_and_units(trigger):
    weak = trigger.attribute("the doctor read a small book slowly", target="fruit", method="ablation")
    assert weak.units == "probability"
    assert weak.scale == full_colour_scale([w.raw for w in weak.words])
    assert max(abs(w.raw) for w in weak.words) / weak.scale <= 1.0


@pytest.mark.parametrize("integration", ["gausslegendre", "riemann_middle"])
def test_gradients_are_captums_layer_integrated_gradients(trigger, integration):
    """The in-house integration (in passes, so that the GUI can stop it between them) gives what
    Captum's LayerIntegratedGradients gives on the same layer, baseline and quadrature."""
    import numpy as np
    import torch
    from captum.attr import LayerIntegratedGradients

    from local_models.words import group_tokens

    text = "the doctor read a small banana slowly"
    ours = trigger.attribute(text, method="gradients", target="fruit", n_steps=12, integration=integration,
                             precision="float32", steps_per_pass=5)
    runtime, head = trigger.runtime, trigger.head
    batch = trigger.encode([text])
    feeds = runtime.feeds(batch)
    input_ids = feeds.pop("input_ids")
    baseline = input_ids.clone()
    baseline[0, torch.tensor([o is not None for o in batch.offsets[0]])] = trigger.encoder.pad_token_id
    columns = torch.tensor(head._columns, dtype=torch.float32)

    def probabilities(ids, *extra):
        logits = runtime.module(input_ids=ids, **dict(zip(feeds, extra))).logits
        return torch.softmax(logits, dim=-1) @ columns

    lig = LayerIntegratedGradients(probabilities, runtime.embedding_layer())
    with torch.enable_grad():
        reference, delta = lig.attribute(inputs=input_ids, baselines=baseline, additional_forward_args=tuple(feeds.values()),
                                         target=trigger.labels.index("fruit"), n_steps=12, method=integration,
                                         return_convergence_delta=True)
    per_token = reference.sum(dim=-1)[0].detach().numpy()
    units = group_tokens(text, 0, batch.segment_offsets(0, 0))
    expected = [float(per_token[list(u.token_positions)].sum()) for u in units]
    assert [w.raw for w in ours.words] == pytest.approx(expected, abs=1e-5)
    assert ours.convergence_delta == pytest.approx(float(delta.abs().max()), abs=1e-5)
    assert ours.details["integration"] == integration and np.isfinite(ours.convergence_delta)


def test_gradient_settings_are_checked_and_reported(trigger):
    from local_models.attribution import gradient_precision

    default = trigger.attribute("the doctor read a banana", method="gradients")
    assert default.details["precision"] == gradient_precision("cpu")
    bf16 = trigger.attribute("the doctor read a banana", method="gradients", precision="bfloat16")
    assert max(bf16.words, key=lambda w: abs(w.score)).text == TRIGGER
    for bad, message in ((dict(integration="simpson"), "unknown integration"), (dict(precision="int4"), "precision"),
                         (dict(n_steps=0), "at least 1")):
        with pytest.raises(ValueError, match=message):
            trigger.attribute("the doctor read a banana", method="gradients", **bad)
