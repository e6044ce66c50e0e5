"""Gradient-guided word substitution (HotFlip-style): whole vocabulary words in place of the words
that carry the prediction, ranked by the first-order change of the model's label's probability
(``local_models.hotflip``). The checker confirms each by a forward pass. A substitution changes
what the text says, so it always needs a person's judgement of its label.

Needs the target's PyTorch form (``GenerationContext.gradients``); an ONNX-only target reports
``Unavailable.NO_GRADIENTS``.
"""

from __future__ import annotations

from app.core.assist.base import GeneratorUnavailable, makes
from app.core.assist.rule_text import cased_like
from app.core.assist.types import Candidate, GenerationContext, Generator, Goal, Unavailable
from app.core.text import STOPWORDS  # neither replaced nor proposed: broken text, not an example
from local_models.hotflip import hotflip

EDIT_TYPE = "word_substitution"
TOP_WORDS = 4
PER_WORD = 6


@makes(Generator.SUBSTITUTION)
def generate(context: GenerationContext) -> list[Candidate]:
    """Per word (most attributed first), its best replacements; interleaved word by word so that
    every chosen word gets its best one before any gets its second."""
    engine = context.gradients
    if engine is None or not getattr(engine, "supports_gradients", False):
        raise GeneratorUnavailable(Unavailable.NO_GRADIENTS)
    inputs = context.inputs if context.inputs is not None else context.text
    # the most attributed words toward the model's label (the next highest too when few push toward it)
    spans = [(w.start, w.end) for w in sorted(context.words, key=lambda w: -w.score)
             if any(ch.isalpha() for ch in w.word) and w.word.lower() not in STOPWORDS][:TOP_WORDS]
    # fool: lower the probability of the label the writer gave; contrast: of the text's present label
    # (the writer's, else the model's): the edit should change what the text says, and the writer
    # confirms the new label
    wanted = context.writer_label if context.goal == Goal.FOOL else (context.text_label or context.model_label)
    target = wanted if wanted in getattr(engine, "labels", ()) else None
    result = hotflip(engine, inputs, segment=context.segment, target=target, spans=spans or None,
                     top_words=TOP_WORDS, per_word=PER_WORD, exclude=sorted(STOPWORDS),
                     gradients=context.gradient_pass)
    if not result.words:
        raise GeneratorUnavailable(Unavailable.NO_WORDS)
    text = context.text
    out: list[Candidate] = []
    for rank in range(PER_WORD):
        for word in result.words:
            if rank >= len(word.replacements) or text[word.start:word.end] != word.text:
                continue
            new = cased_like(word.text, word.replacements[rank].word)  # the rules' casing
            out.append(Candidate(text[:word.start] + new + text[word.end:], Generator.SUBSTITUTION, EDIT_TYPE,
                                 note=f"'{word.text}' → '{new}'"))
    return out
