"""Fetches what the example views show (run on the database worker by the Validate, Review and Data pages) and
hands it to the pure builders of ``app.views``: the typed view-models the widgets take."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from app.core.errors import NotFound
from app.views.example import ExampleDetailView, data_detail
from app.views.review import ReviewItemView, review_item
from app.views.validate import ValidationItemView, validation_item
from app.views.wellbeing import blur_view

if TYPE_CHECKING:
    from app.core.desk import Desk
    from app.core.tasks.definition import TaskDefinition


def _model_names(desk: Desk) -> dict[uuid.UUID, str]:
    return {m.id: m.name for m in desk.models.all()}


def _names(desk: Desk) -> dict[uuid.UUID, str]:
    return {p.id: p.display_name for p in desk.people.all()}


def for_validation(desk: Desk, example_id: uuid.UUID, *, blur_words: tuple[str, ...] = (),
                   masked: bool = False) -> ValidationItemView:
    """What a validator sees of one example (the model output travels along, hidden or not), its
    texts masked with the task's blur words where ``masked`` (the person's choice)."""
    example = desk.examples.get(example_id)
    definition = desk.tasks.definition(example.task_id)
    original = desk.examples.get(example.perturbation_of) if example.perturbation_of is not None else None
    return validation_item(example, definition, _model_names(desk), original, blur_words=blur_words, masked=masked,
                           names=_names(desk) if (example.origin or {}).get("kind") == "variant" else None)


def reading_words(desk: Desk, *, browsing: bool) -> Callable[[str], tuple[str, ...]]:
    """On the worker: task code → the words to mask for the working person in this kind of view
    (reviewing or browsing; none where they read it unmasked), each task's list read once."""
    read: dict[str, tuple[str, ...]] = {}

    def words(code: str) -> tuple[str, ...]:
        if code not in read:
            read[code] = desk.reading_words(code, browsing=browsing)
        return read[code]

    return words


def _blurred(desk: Desk, detail: ExampleDetailView, definition: TaskDefinition, *, browsing: bool) -> ExampleDetailView:
    """``detail`` with its texts masked as the working person chose for this kind of view (reviewing
    or browsing), and a long one under the task's content warning closed."""
    profile = desk.settings.wellbeing_for(str(desk.current_person_id))
    masked = profile.blur_browsing if browsing else profile.blur_validating
    words = reading_words(desk, browsing=browsing)(definition.code)
    return replace(detail, blur=blur_view(detail.shown_texts, words, masked=masked,
                                          content_warning=definition.content_warning))


def for_review(desk: Desk, example_id: uuid.UUID) -> ReviewItemView:
    """The example as a lead reviews it, with every verdict by name and the lead reviews."""
    example = desk.examples.get(example_id)
    definition = desk.tasks.definition(example.task_id)
    original = desk.examples.get(example.perturbation_of) if example.perturbation_of is not None else None
    item = review_item(example, definition, _names(desk), _model_names(desk), original, desk.lead.history(example_id))
    return replace(item, detail=_blurred(desk, item.detail, definition, browsing=False))


def for_data_tab(desk: Desk, example_id: uuid.UUID) -> ExampleDetailView:
    """Everything the Data tab's detail pane shows about one example."""
    example = desk.examples.get(example_id)
    definition = desk.tasks.definition(example.task_id)
    original = None
    if example.perturbation_of is not None:
        try:
            original = desk.examples.get(example.perturbation_of)
        except NotFound:  # it arrives with the next sync
            original = None
    detail = data_detail(example, definition, _names(desk), _model_names(desk), original)
    return _blurred(desk, detail, definition, browsing=True)
