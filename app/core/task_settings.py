"""A lead's settings for a task, for their whole team: one typed record, one field per setting.

A lead's desk keeps the settings in force in one meta value per task (``app.core.services.tasks``),
pushes them in one ``task_setting`` record (its ``settings`` field is ``TaskSettings.to_json()``),
the server keeps them in one JSON column, and every desk of the team takes the latest to reach the
server. Nothing on that path names a setting: a new setting is one field below, with its default,
its check and its JSON form (``setting``). This module is free of storage, so view-models may use it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from app.core.assist.lexicon import WordChanges
from app.core.errors import DynadeskError
from app.core.quality.settings import QualitySettings
from app.core.tasks.definition import TaskDefinition
from app.core.wellbeing.word_list import clean_words

log = logging.getLogger(__name__)

MAX_THRESHOLD: Final[int] = 20
# How many variants of one seed the adaptive suite keeps from one growth (a lead's choice).
VARIANTS_PER_SEED: Final[int] = 20
MAX_VARIANTS_PER_SEED: Final[int] = 200
# The JSON form of a task's settings on the wire (a lead's blur words alone may take about 480 KiB).
MAX_SETTINGS_BYTES: Final[int] = 1024 * 1024
_FORM: Final[str] = "task_setting"


class InvalidTaskSettings(DynadeskError):
    pass


@dataclass(frozen=True)
class SettingForm:
    """How one setting is checked and written. ``check`` takes the value or its JSON form and returns
    the value, checked and in its normal form (a ``DynadeskError`` says what is wrong); ``dump``
    writes its JSON form."""

    check: Callable[[Any], Any]
    dump: Callable[[Any], Any]


def setting(default: Any, check: Callable[[Any], Any], dump: Callable[[Any], Any] = lambda value: value) -> Any:
    """A field of ``TaskSettings``: its default (what is in force until a lead sets it), check and JSON form."""
    return field(default=default, metadata={_FORM: SettingForm(check, dump)})


def _threshold(value: Any) -> int | None:
    if value is None:
        return None  # the task definition's own number
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THRESHOLD:
        raise InvalidTaskSettings(f"The number of matching verdicts must be between 1 and {MAX_THRESHOLD}; "
                                  f"got {value!r}.")
    return value


def _quality(value: Any) -> QualitySettings:
    return value if isinstance(value, QualitySettings) else QualitySettings.from_json(value)


def _word_changes(value: Any) -> WordChanges:
    return WordChanges.from_json(value.to_json() if isinstance(value, WordChanges) else value)


def _blur_words(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        raise InvalidTaskSettings(f"The blur words must be a list of words; got {type(value).__name__}.")
    return clean_words(value)


def _variants_per_seed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VARIANTS_PER_SEED:
        raise InvalidTaskSettings(f"The variants kept per seed must be a whole number between 1 and "
                                  f"{MAX_VARIANTS_PER_SEED}; got {value!r}.")
    return value


@dataclass(frozen=True)
class TaskSettings:
    """``agreement_threshold``: matching peer verdicts that decide an example (None: the task
    definition's number; a team of two cannot reach the usual 3).
    ``quality``: the near-duplicate threshold and the dashboard's alert lines.
    ``assist_words``: the lead's changes to the writing assistant's word lists (checked against the
    task's own lists where a lead sets them: ``Desk.set_task_settings``).
    ``blur_words``: the words the team's leads added to the task's blur list.
    ``variants_per_seed``: at most how many variants of one seed one growth of the adaptive suite adds."""

    agreement_threshold: int | None = setting(None, _threshold)
    quality: QualitySettings = setting(QualitySettings(), _quality, QualitySettings.to_json)
    assist_words: WordChanges = setting(WordChanges(), _word_changes, WordChanges.to_json)
    blur_words: tuple[str, ...] = setting((), _blur_words, list)
    variants_per_seed: int = setting(VARIANTS_PER_SEED, _variants_per_seed)

    def __post_init__(self) -> None:
        for name, form in _forms(type(self)).items():
            object.__setattr__(self, name, form.check(getattr(self, name)))

    def threshold_for(self, definition: TaskDefinition) -> int:
        """Matching peer verdicts that decide an example of the task: the lead's number, else the definition's."""
        return definition.agreement_threshold if self.agreement_threshold is None else self.agreement_threshold

    def changed(self, **changes: Any) -> TaskSettings:
        """These settings with ``changes`` (by field name), each checked: the setting's own
        ``DynadeskError`` says what is wrong with it; an unknown name is refused."""
        unknown = sorted(set(changes) - set(_forms(type(self))))
        if unknown:
            raise InvalidTaskSettings(f"Unknown task setting(s): {', '.join(unknown)}. "
                                      f"Known: {', '.join(_forms(type(self)))}.")
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The JSON form: the settings that differ from their defaults (a desk older than a setting
        reads a record that leaves it at its default)."""
        return {name: form.dump(getattr(self, name)) for name, form in _forms(type(self)).items()
                if getattr(self, name) != _defaults(type(self))[name]}

    @classmethod
    def from_json(cls, data: Any, *, fallback: TaskSettings | None = None) -> TaskSettings:
        """Settings from their JSON form; missing ones take their defaults.

        Strict (no ``fallback``): anything wrong (an unknown setting, a value its check refuses) is
        an ``InvalidTaskSettings`` naming every problem. With ``fallback`` (what a desk reads from its
        own storage or takes from the team): a setting this desk cannot take keeps the fallback's
        value and an unknown one is left out, each logged, so one bad value never loses the others."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            if fallback is not None:
                log.warning("task settings that are not an object were not taken: %r", type(data).__name__)
                return fallback
            raise InvalidTaskSettings(f"Task settings must be an object; got {type(data).__name__}.")
        forms = _forms(cls)
        problems = [f"Unknown setting '{name}' (known: {', '.join(forms)})." for name in data if name not in forms]
        values = dict(_defaults(cls))
        for name, form in forms.items():
            if name not in data:
                continue
            try:
                values[name] = form.check(data[name])
            except (DynadeskError, ValueError, TypeError) as exc:
                problems.append(_sentence(f"{name}: {exc}"))
                if fallback is not None:
                    values[name] = getattr(fallback, name)
        if problems and fallback is None:
            raise InvalidTaskSettings("These task settings cannot be used: " + " ".join(problems))
        if problems:
            log.warning("task settings taken in part: %s", " ".join(problems))
        built = object.__new__(cls)  # every value is checked already
        for name, value in values.items():
            object.__setattr__(built, name, value)
        return built


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


_FORMS: dict[type, tuple[dict[str, SettingForm], dict[str, Any]]] = {}


def _forms(model: type[TaskSettings]) -> dict[str, SettingForm]:
    """The settings of ``model`` (``TaskSettings``, or a subclass with one more), by name."""
    return _described(model)[0]


def _defaults(model: type[TaskSettings]) -> dict[str, Any]:
    return _described(model)[1]


def _described(model: type[TaskSettings]) -> tuple[dict[str, SettingForm], dict[str, Any]]:
    if model not in _FORMS:
        _FORMS[model] = ({item.name: item.metadata[_FORM] for item in fields(model)},
                         {item.name: item.default for item in fields(model)})
    return _FORMS[model]
