"""The Validate tab's view-models: one example of the person's queue as the validator sees it, and
the queue's status line. Built by pure functions; the controller fetches on the database worker."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.core.domain import ReviewAction, ValidationState
from app.core.tasks.definition import InputKind
from app.core.wellbeing.blur import mask_spans
from app.views.create import DiffPiece, diff_view
from app.views.example import Pairs, VerdictChoice, answer_label, explanations, verdict_text
from app.views.wellbeing import BlurView, blur_view

if TYPE_CHECKING:
    from app.core.storage.models import Example
    from app.core.tasks.definition import TaskDefinition


@dataclass(frozen=True, slots=True)
class LabelledText:
    text: str
    label: str | None


@dataclass(frozen=True, slots=True)
class PairView:
    """A perturbation beside the example it edits, and the word diff between them."""

    original: LabelledText
    edited: LabelledText
    diff: tuple[DiffPiece, ...]  # in reading order


@dataclass(frozen=True, slots=True)
class ModelAnswerView:
    model: str
    label: str
    probabilities: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class ModelOutputView:
    models: tuple[ModelAnswerView, ...]
    fooled: bool | None
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VariantNoteView:
    """A variant the desk generated from a seed: what it was made from, by which rule, for whom. Never
    anyone's own writing: the seed's text is shown (masked as any reading text), not its author."""

    seed: BlurView  # the seed's text, masked as the validator reads
    rule: str
    generated_by: str

    @property
    def seed_text(self) -> str:
        return self.seed.texts[0].text if self.seed.texts else ""


def variant_note(origin: Mapping[str, object] | None, names: Mapping[uuid.UUID, str], *,
                 blur_words: Sequence[str] = (), masked: bool = False) -> VariantNoteView | None:
    """The note for an example whose origin says it is a generated variant; None for any other."""
    if not origin or origin.get("kind") != "variant":
        return None
    generated_by = str(origin.get("generated_by") or "")
    try:
        who = names.get(uuid.UUID(generated_by), "a lead")
    except ValueError:
        who = "a lead"
    generator, edit = str(origin.get("rule") or ""), str(origin.get("edit_type") or "")
    # the edit names what changed (a homoglyph looks like the seed): first, with the generator after it
    rule = f"{edit} ({generator})" if edit and generator and edit != generator else edit or generator or "?"
    return VariantNoteView(blur_view((str(origin.get("seed_text") or ""),), blur_words, masked=masked,
                                     content_warning=None), rule, who)


@dataclass(frozen=True, slots=True)
class ValidationItemView:
    """What a validator sees of one example (the model output travels along, hidden or not)."""

    id: uuid.UUID
    task_code: str
    context: Pairs
    written: Pairs
    label: str | None
    label_name: str  # "label", or "answer" for extractive QA
    labels: tuple[str, ...]
    explanations: Pairs
    pair: PairView | None
    output: ModelOutputView
    hide_output: bool
    content_warning: str | None
    review_state: ReviewAction | None = None
    review_comment: str | None = None
    # the texts shown (contexts, then the written texts or the pair's two), masked as the person chose
    blur: BlurView | None = None
    # per explanation answer: the spans (Python indices) of blur words to mask, when masked
    explanation_masks: tuple[tuple[tuple[int, int], ...], ...] = ()
    variant: VariantNoteView | None = None  # a generated variant: its seed, rule and generator

    @property
    def shown_texts(self) -> tuple[str, ...]:
        """The texts the view shows, in the order of ``blur.texts``."""
        halves = (self.pair.original.text, self.pair.edited.text) if self.pair is not None else ()
        return (*(text for _name, text in self.context), *(halves or (text for _name, text in self.written)))


def validation_item(example: Example, definition: TaskDefinition, models: Mapping[uuid.UUID, str],
                    original: Example | None = None, *, blur_words: Sequence[str] = (),
                    masked: bool = False, names: Mapping[uuid.UUID, str] | None = None) -> ValidationItemView:
    """``models``: names by id; ``original``: for a perturbation, the example it edits; ``blur_words``
    and ``masked``: the task's blur list and whether this person reads validation masked; ``names``:
    people's names by id (who generated a variant)."""
    label = answer_label(example, definition)
    pair = None
    if original is not None:
        # ``text`` is what the author wrote (the written inputs), stored at submission
        pair = PairView(LabelledText(original.text, answer_label(original, definition)),
                        LabelledText(example.text, label), diff_view(original.text, example.text))
    labels = tuple(definition.labels)
    item = ValidationItemView(
        id=example.id, task_code=definition.code,
        context=tuple((f.label, str(example.inputs.get(f.name, ""))) for f in definition.inputs
                      if f.kind == InputKind.CONTEXT and example.inputs.get(f.name)),
        written=tuple((f.label, str(example.inputs.get(f.name, ""))) for f in definition.written_inputs),
        label=label, label_name="answer" if definition.is_extractive else "label", labels=labels,
        explanations=explanations(example, definition), pair=pair,
        output=ModelOutputView(tuple(ModelAnswerView(models.get(o.model_id, "target model"), o.label,
                                                     tuple(o.probabilities.items())) for o in example.outputs),
                               example.model_fooled, labels),
        hide_output=definition.hide_model_output_until_verdict, content_warning=definition.content_warning,
        review_state=ReviewAction(example.review_state) if example.review_state else None,
        review_comment=example.review_comment,
    )
    blur = blur_view(item.shown_texts, blur_words, masked=masked, content_warning=definition.content_warning)
    masks = tuple(tuple((s.start, s.end) for s in mask_spans(answer, blur_words)) if masked else ()
                  for _question, answer in item.explanations)
    return replace(item, blur=blur, explanation_masks=masks,
                   variant=variant_note(example.origin, names or {}, blur_words=blur_words, masked=masked))


@dataclass(frozen=True, slots=True)
class QueueView:
    """The tab after a fetch: the status line and either the next example or why there is none."""

    status: str
    example: ValidationItemView | None
    empty: str = ""
    counting: tuple[str, str] | None = None  # (name, task) while what is left is still being counted


def queue_view(example: ValidationItemView | None, remaining: int | None, name: str, task: str,
               skipped: Sequence[uuid.UUID], *, held_back: int = 0, opted_out: Sequence[str] = ()) -> QueueView:
    """``held_back``: examples the person's opt-outs by target group (``opted_out``) keep from them;
    ``remaining`` None: still being counted (the example shows first)."""
    held = ""
    if held_back and opted_out:
        held = f" · {held_back} held back by your opt-outs"
    if example is None:
        if held_back:
            groups = ", ".join(opted_out) or "the groups you opted out of"
            return QueueView(f"Validating as <b>{name}</b> · {task}{held}", None,
                             f"Only examples targeting groups you opted out of are left in {task}: "
                             f"{held_back} example{'s' if held_back != 1 else ''} targeting {groups}. "
                             "They are not served to you. To change that, open Profile (the Wellbeing "
                             "section) and take the group off your opt-outs.")
        return QueueView(f"Validating as <b>{name}</b> · {task}", None,
                         f"Nothing left for you to validate in {task}. Examples you wrote, examples "
                         "you have already validated and examples that are decided are not served.")
    again = " · skipped examples come round again" if example.id in skipped else ""
    if remaining is None:
        return QueueView(f"Validating as <b>{name}</b> · {task} · counting what is left for you…{again}", example,
                         counting=(name, task))
    return QueueView(f"Validating as <b>{name}</b> · {task} · <b>{remaining}</b> left for you "
                     f"(model-fooling first, then the fewest verdicts){again}{held}", example)


def stored_text(choice: VerdictChoice, state: str) -> str:
    """The message once a verdict is in the database; ``state`` is the example's validation state after it."""
    decided = " The example is now decided." if state == ValidationState.DECIDED else ""
    return f"✓ Stored your verdict: <b>{verdict_text(choice)}</b>.{decided}"
