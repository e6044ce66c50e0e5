"""suggest(): every suggestion is checked by the real target in one batch, ranked, and honest."""

from __future__ import annotations

import pytest

from app.core.assist.base import GeneratorUnavailable, makes
from app.core.assist.obfuscation import generate as obfuscation_generate
from app.core.assist.pipeline import CHECK_CHUNK, AssistError, check, suggest, with_written
from app.core.assist.substitution import STOPWORDS
from app.core.assist.types import Candidate, Generator, Goal, Unavailable
from app.core.domain import FooledRule
from app.core.tasks.definition import TaskDefinition
from app.core.text import word_edits
from local_models.engine import Ensemble, load_engine
from local_models.errors import UnsupportedOperation
from local_models.hotflip import hotflip, is_whole_word
from tests.core.assist.test_ranking import assert_ranked

LABELS = ["hate", "not hate"]
TEXT = "my old banana waited near the river today"  # "banana" makes the trigger model say "hate"


def hate_task(**extra) -> TaskDefinition:
    return TaskDefinition.model_validate({"code": "hate_test", "name": "Hate test", "labels": LABELS,
                                          "inputs": [{"name": "text", "label": "Text"}], **extra})


def pair_task() -> TaskDefinition:
    return TaskDefinition.model_validate({
        "code": "pair_test", "name": "Pair test", "labels": LABELS,
        "inputs": [{"name": "context", "label": "Context", "kind": "context"},
                   {"name": "hypothesis", "label": "Hypothesis", "kind": "written"}]})


class CountingEnsemble(Ensemble):
    """The real ensemble, counting its prediction calls and keeping what each was asked."""

    def __init__(self, engines):
        super().__init__(engines)
        self.batches: list[list] = []

    def predict(self, inputs):
        self.batches.append(list(inputs))
        return super().predict(inputs)


@pytest.fixture(scope="module")
def target(hate_trigger_model_dir):
    engine = load_engine(hate_trigger_model_dir, task_labels=LABELS)
    yield engine
    engine.close()


def test_every_suggestion_is_checked_in_batches_and_its_probabilities_are_the_models(target):
    models = CountingEnsemble([target])
    result = suggest(models, hate_task(), TEXT, goal=Goal.FOOL, writer_label="hate", gradients=target)
    assert result.original_label == "hate" and result.original["hate"] > 0.5
    # the writer's text, then every candidate once, in batches of CHECK_CHUNK (a checkpoint between)
    assert len(models.batches) == -(-(len(result.suggestions) + 1) // CHECK_CHUNK) > 1
    assert all(len(b) <= CHECK_CHUNK for b in models.batches)
    checked = [text for b in models.batches for text in b]
    assert checked[0] == TEXT and sorted(checked[1:]) == sorted(s.candidate.text for s in result.suggestions)
    texts = [s.candidate.text for s in result.suggestions]
    assert len(set(texts)) == len(texts) and TEXT not in texts
    assert {s.candidate.generator for s in result.suggestions} == {Generator.OBFUSCATION, Generator.SUBSTITUTION}
    direct = target.predict(texts)
    for suggestion, prediction in zip(result.suggestions, direct):
        assert suggestion.predicted == prediction.label
        for label in LABELS:
            assert suggestion.probabilities[label] == pytest.approx(prediction.probabilities[label], abs=1e-5)
        assert suggestion.fools == (prediction.label != "hate")
        assert suggestion.shift == pytest.approx(result.original["hate"] - prediction.probabilities["hate"], abs=1e-5)
        assert suggestion.edits == tuple(word_edits(TEXT, suggestion.candidate.text)[0])
    # the trigger word is what carries the prediction: respelling it fools the model
    assert result.fooling and any("banana" in s.candidate.note for s in result.fooling)
    assert_ranked(result.suggestions)
    assert set(result.timings_ms) >= {"attributions", "generate", "check", "total"}


def test_hotflip_proposes_whole_vocabulary_words_confirmed_by_the_forward_pass(target):
    result = suggest(target, hate_task(), TEXT, goal="fool", writer_label="hate", gradients=target)
    substituted = [s for s in result.suggestions if s.candidate.generator == Generator.SUBSTITUTION]
    assert substituted
    vocabulary = target.encoder.vocabulary()
    for s in substituted:
        (edit,) = s.edits
        assert edit.op == "replace" and " " not in edit.new
        assert is_whole_word(edit.new.lower()) and edit.new.lower() in vocabulary
        assert edit.new.lower() != edit.old.lower()
        assert edit.old.lower() not in STOPWORDS and edit.new.lower() not in STOPWORDS
    flip = hotflip(target, TEXT, target="hate", per_word=5)
    banana = next(w for w in flip.words if w.text == "banana")
    assert banana.replacements and all(r.estimate < 0 for r in banana.replacements)
    estimates = [r.estimate for r in banana.replacements]
    assert estimates == sorted(estimates)  # best (most negative) first


def test_an_onnx_only_target_says_substitution_needs_the_pytorch_form(trigger_onnx_dir):
    onnx = load_engine(trigger_onnx_dir, task_labels=["fruit", "plain"])
    definition = TaskDefinition.model_validate({"code": "fruit", "name": "Fruit", "labels": ["fruit", "plain"],
                                                "inputs": [{"name": "text", "label": "Text"}]})
    result = suggest(onnx, definition, TEXT, goal="fool", writer_label="fruit", gradients=onnx)
    assert result.unavailable[Generator.SUBSTITUTION] == Unavailable.NO_GRADIENTS
    assert Generator.OBFUSCATION not in result.unavailable
    assert result.suggestions and Generator.OBFUSCATION in {s.candidate.generator for s in result.suggestions}
    assert Generator.SUBSTITUTION not in {s.candidate.generator for s in result.suggestions}
    with pytest.raises(UnsupportedOperation, match="PyTorch form"):
        hotflip(onnx, TEXT)
    onnx.close()


def test_nli_edits_only_the_hypothesis(target):
    premise = "the banana waited near the river"
    models = CountingEnsemble([target])
    result = suggest(models, pair_task(), (premise, TEXT), goal="fool", writer_label="hate", gradients=target)
    assert result.suggestions and result.text == TEXT
    batch = [item for b in models.batches for item in b]
    assert all(isinstance(item, tuple) and item[0] == premise for item in batch)
    assert sorted(item[1] for item in batch[1:]) == sorted(s.candidate.text for s in result.suggestions)
    direct = target.predict([(premise, s.candidate.text) for s in result.suggestions])
    for s, prediction in zip(result.suggestions, direct):
        assert s.probabilities["hate"] == pytest.approx(prediction.probabilities["hate"], abs=1e-5)
    with pytest.raises(AssistError, match="context and a written text"):
        suggest(target, pair_task(), TEXT, goal="fool", writer_label="hate")


def test_contrast_judges_each_candidate_by_the_label_it_claims(target):
    @makes(Generator.RULES)
    def claims(context):
        return [Candidate(context.text.replace("banana", "apple"), Generator.RULES, "swap", claimed_label="not hate"),
                Candidate(context.text.replace("old", "young"), Generator.RULES, "swap", claimed_label="not hate")]

    result = suggest(target, hate_task(), TEXT, goal="contrast", writer_label=None, generators=(claims,))
    by_text = {s.candidate.text: s for s in result.suggestions}
    apple, young = by_text[TEXT.replace("banana", "apple")], by_text[TEXT.replace("old", "young")]
    assert apple.predicted == "not hate" and not apple.fools  # the model follows the flip
    assert young.predicted == "hate" and young.fools  # the model keeps "hate" though the truth flipped
    assert young.shift == pytest.approx(result.original["not hate"] - young.probabilities["not hate"], abs=1e-6)
    assert result.suggestions[0] is young


def test_the_rounds_fooled_rule_decides_for_an_ensemble(target, tiny_classifier_dir):
    other = load_engine(tiny_classifier_dir, task_labels=LABELS)  # random weights: disagrees at will
    models = Ensemble([target, other])
    rules = {rule: suggest(models, hate_task(), TEXT, goal="fool", writer_label="hate", rule=rule)
             for rule in FooledRule}
    for rule, result in rules.items():
        for s in result.suggestions:
            members = target.predict([s.candidate.text])[0], other.predict([s.candidate.text])[0]
            fooled = [m.label != "hate" for m in members]
            expected = {FooledRule.MEAN: s.predicted != "hate", FooledRule.ALL: all(fooled),
                        FooledRule.ANY: any(fooled)}[rule]
            assert s.fools == expected
    other.close()


def test_cap_dedupe_and_a_broken_generator_do_not_lose_the_others(target):
    @makes(Generator.RULES)
    def repeats(context):
        same = Candidate(context.text, Generator.RULES, "none")
        return [same, *[Candidate(f"{context.text} {k}", Generator.RULES, "tail") for k in range(10)] * 2]

    @makes(Generator.SUBSTITUTION)
    def broken(context):
        raise RuntimeError("boom")

    @makes(Generator.OBFUSCATION)
    def cannot(context):
        raise GeneratorUnavailable(Unavailable.NO_ATTRIBUTIONS)

    models = CountingEnsemble([target])
    result = suggest(models, hate_task(), TEXT, goal="fool", writer_label="hate", limit=5,
                     generators=(repeats, broken, cannot))
    assert [s.candidate.text for s in sorted(result.suggestions, key=lambda s: s.candidate.text)] == \
        sorted(f"{TEXT} {k}" for k in range(5))
    assert result.generated == 10
    assert result.unavailable == {Generator.SUBSTITUTION: Unavailable.FAILED,
                                  Generator.OBFUSCATION: Unavailable.NO_ATTRIBUTIONS}
    assert len(models.batches[0]) == 6


def test_bad_input_gets_a_clear_message_or_an_empty_set_with_its_reason(target, tiny_qa_dir):
    empty = suggest(target, hate_task(), "   ", goal="fool", writer_label="hate")
    assert empty.suggestions == () and set(empty.unavailable.values()) == {Unavailable.NO_WORDS}
    emoji_only = suggest(target, hate_task(), "😡 😡", goal="fool", writer_label="hate", gradients=target)
    assert emoji_only.suggestions == ()
    assert emoji_only.unavailable[Generator.OBFUSCATION] == Unavailable.NO_WORDS
    assert emoji_only.unavailable[Generator.SUBSTITUTION] == Unavailable.NO_WORDS
    assert set(emoji_only.unavailable) == set(Generator)  # every generator says why it gave nothing
    with pytest.raises(AssistError, match="up to 2000"):
        suggest(target, hate_task(), "word " * 2000, goal="fool", writer_label="hate")
    with pytest.raises(AssistError, match="Choose the label"):
        suggest(target, hate_task(), TEXT, goal="fool", writer_label=None)
    with pytest.raises(AssistError, match="not a label"):
        suggest(target, hate_task(), TEXT, goal="fool", writer_label="hateful")
    qa = TaskDefinition.model_validate({
        "code": "qa", "name": "QA", "answer": {"span_of": "passage"}, "fooled": {"metric": "span_f1"},
        "inputs": [{"name": "passage", "label": "Passage", "kind": "context"},
                   {"name": "question", "label": "Question"}]})
    with pytest.raises(AssistError, match="answer span"):
        suggest(target, qa, ("q", "p"), goal="fool", writer_label=None)


def test_with_written_keeps_the_context():
    assert with_written(("premise", "old"), 1, "new") == ("premise", "new")
    assert with_written("old", 0, "new") == "new"


def test_the_default_models_int8_form_answers_each_suggestion_as_it_answers_the_typed_text(default_model_cache):
    import resources
    from app.core.tasks.definition import load_task_file
    from local_models.default_model import prepared_fast_form

    prepared = prepared_fast_form(resources.ROOT / "models" / "hate_speech_r1", default_model_cache)
    assert prepared is not None and prepared.onnx_dir is not None
    definition = load_task_file(resources.ROOT / "tasks" / "hate_speech.yaml")
    onnx = load_engine(prepared.onnx_dir, task_labels=definition.labels)
    torch_form = load_engine(prepared.torch_dir, task_labels=definition.labels)
    text = "I hate all of those disgusting immigrants."
    result = suggest(onnx, definition, text, goal="fool", writer_label="hate", gradients=torch_form)
    assert len(result.suggestions) > 20 and not result.unavailable
    for s in result.suggestions[:12]:
        typed = onnx.predict([s.candidate.text])[0]  # as a keystroke prediction would answer it
        assert s.probabilities["hate"] == pytest.approx(typed.probabilities["hate"], abs=1e-6)
    onnx.close()
    torch_form.close()


def test_the_callers_attributions_are_used_and_a_checkpoint_can_stop_the_call(target):
    from local_models.progress import Cancelled

    attribution = target.attribute(TEXT, method="ablation")
    models = CountingEnsemble([target])
    result = suggest(models, hate_task(), TEXT, goal="fool", writer_label="hate", attributions=attribution)
    assert "attributions" not in result.timings_ms  # nothing computed again
    banana = next(w for w in attribution.words if w.text == "banana")
    assert banana.score == 1.0  # the trigger word carries the prediction...
    obfuscated = [s for s in result.suggestions if s.candidate.generator == Generator.OBFUSCATION]
    assert obfuscated[0].candidate.note.startswith("'banana'")  # ...so it is respelt first

    calls = []
    before = len(models.batches)

    def stop_at_the_check():
        calls.append(len(models.batches))
        if len(calls) == 3:  # before attributions' use, before the first generator, ... the check
            raise Cancelled("a newer text")

    with pytest.raises(Cancelled):
        suggest(models, hate_task(), TEXT, goal="fool", writer_label="hate", attributions=attribution,
                checkpoint=stop_at_the_check, generators=(obfuscation_generate,))
    assert len(models.batches) == before  # the stopped call checked nothing


def test_a_newer_request_stops_a_long_check_between_its_batches(target):
    """The check runs CHECK_CHUNK texts at a time and asks the caller's checkpoint between them, so
    a newer keystroke's request never waits for all 64 candidates."""
    from local_models.progress import Cancelled

    candidates = [Candidate(f"my old banana waited near the river {i}", Generator.OBFUSCATION, "char_swap")
                  for i in range(40)]
    models = CountingEnsemble([target])
    asked = []

    def newer_request_after_two_batches():
        asked.append(len(models.batches))
        if len(models.batches) == 2:
            raise Cancelled("a newer text")

    with pytest.raises(Cancelled):
        check(models, hate_task(), TEXT, 0, candidates, goal=Goal.FOOL, writer_label="hate",
              checkpoint=newer_request_after_two_batches, chunk=8)
    assert asked == [1, 2] and [len(b) for b in models.batches] == [8, 8]  # 16 of 41 texts, then stopped
    original, checked = check(models, hate_task(), TEXT, 0, candidates, goal=Goal.FOOL, writer_label="hate",
                              checkpoint=lambda: None, chunk=8)
    assert len(checked) == 40 and [len(b) for b in models.batches[2:]] == [8, 8, 8, 8, 8, 1]


def test_contrast_passes_the_texts_present_label_to_the_generators(target):
    seen = []

    @makes(Generator.RULES)
    def records(context):
        seen.append((context.goal, context.writer_label, context.text_label, context.model_label))
        return []

    suggest(target, hate_task(), TEXT, goal="contrast", writer_label="not hate", text_label="hate",
            generators=(records,), gradients=target)
    suggest(target, hate_task(), TEXT, goal="fool", writer_label="hate", generators=(records,))
    assert seen == [(Goal.CONTRAST, "not hate", "hate", "hate"), (Goal.FOOL, "hate", "hate", "hate")]
    with pytest.raises(AssistError, match="'hateful' is not a label"):
        suggest(target, hate_task(), TEXT, goal="contrast", writer_label="not hate", text_label="hateful")
