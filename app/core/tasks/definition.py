"""The schema of a task definition and the loader that turns YAML files into checked definitions.

A user adds a task by dropping a YAML file into the data folder's ``tasks/``; no code changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from app.core.domain import StrEnum
from app.core.errors import TaskDefinitionError

Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]


class InputKind(StrEnum):
    WRITTEN = "written"  # what the annotator writes
    CONTEXT = "context"  # given by the round (premise, passage); the annotator may not edit it


class MetadataKind(StrEnum):
    CHOICE = "choice"
    MULTI_CHOICE = "multi_choice"
    TEXT = "text"


class FooledMetric(StrEnum):
    LABEL_MISMATCH = "label_mismatch"
    SPAN_F1 = "span_f1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputField(_Strict):
    name: Identifier
    label: str
    kind: InputKind = InputKind.WRITTEN
    multiline: bool = True
    max_chars: int = Field(default=5000, ge=1, le=200_000)
    placeholder: str = ""


class Condition(_Strict):
    """A metadata field applies only when the example's label is one of ``label``."""

    label: list[str] = Field(min_length=1)


class MetadataField(_Strict):
    name: Identifier
    label: str
    kind: MetadataKind
    choices: list[str] = Field(default_factory=list)
    allow_other: bool = False  # a free-text "other" value next to the choices
    required: bool = False  # required whenever the field applies
    applies_when: Condition | None = None
    help: str = ""

    @model_validator(mode="after")
    def _choices_match_kind(self) -> MetadataField:
        if self.kind == MetadataKind.TEXT and self.choices:
            raise ValueError("a text field has no choices")
        if self.kind != MetadataKind.TEXT and not self.choices:
            raise ValueError(f"a {self.kind} field needs a non-empty 'choices' list")
        if len(set(self.choices)) != len(self.choices):
            raise ValueError("choices must be unique")
        return self

    def applies(self, label: str | None) -> bool:
        return self.applies_when is None or (label is not None and label in self.applies_when.label)


class AnswerSpec(_Strict):
    """Extractive answers: a span of one of the context inputs."""

    span_of: Identifier


class FooledSpec(_Strict):
    metric: FooledMetric = FooledMetric.LABEL_MISMATCH
    threshold: float = Field(default=0.4, gt=0, le=1)  # span_f1 only: fooled when F1 < threshold


class PromptSpec(_Strict):
    """Whether the annotator may start from a prompt sentence drawn from the round's contexts."""

    enabled: bool = True
    required: bool = False


class TaskDefinition(_Strict):
    code: Identifier
    name: str = Field(min_length=1)
    description: str = ""
    inputs: list[InputField] = Field(min_length=1)
    labels: list[str] = Field(default_factory=list)
    answer: AnswerSpec | None = None
    metadata: list[MetadataField] = Field(default_factory=list)
    fooled: FooledSpec = FooledSpec()
    agreement_threshold: int = Field(default=3, ge=1, le=50)
    validate_non_fooling: bool = True
    hide_model_output_until_verdict: bool = True
    prompt: PromptSpec | None = None
    content_warning: str | None = None
    guidelines: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> TaskDefinition:
        names = [f.name for f in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError("input names must be unique")
        if not any(f.kind == InputKind.WRITTEN for f in self.inputs):
            raise ValueError("at least one input must be of kind 'written'")
        if bool(self.labels) == bool(self.answer):
            raise ValueError("give either 'labels' (classification) or 'answer' (extractive span), not both or neither")
        if self.labels:
            if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
                raise ValueError("'labels' needs at least two distinct labels")
            if self.fooled.metric != FooledMetric.LABEL_MISMATCH:
                raise ValueError("classification tasks use the 'label_mismatch' fooled metric")
        if self.answer:
            context = {f.name: f for f in self.inputs}.get(self.answer.span_of)
            if context is None or context.kind != InputKind.CONTEXT:
                raise ValueError(f"answer.span_of '{self.answer.span_of}' must name an input of kind 'context'")
            if self.fooled.metric != FooledMetric.SPAN_F1:
                raise ValueError("extractive tasks use the 'span_f1' fooled metric")
        meta_names = [m.name for m in self.metadata]
        if len(set(meta_names)) != len(meta_names):
            raise ValueError("metadata field names must be unique")
        for meta in self.metadata:
            if meta.applies_when and self.labels:
                unknown = set(meta.applies_when.label) - set(self.labels)
                if unknown:
                    raise ValueError(f"metadata '{meta.name}' applies_when names unknown label(s) {sorted(unknown)}")
        return self

    @property
    def is_extractive(self) -> bool:
        return self.answer is not None

    @property
    def written_inputs(self) -> list[InputField]:
        return [f for f in self.inputs if f.kind == InputKind.WRITTEN]

    @property
    def context_inputs(self) -> list[InputField]:
        return [f for f in self.inputs if f.kind == InputKind.CONTEXT]

    def metadata_field(self, name: str) -> MetadataField:
        for meta in self.metadata:
            if meta.name == name:
                return meta
        raise KeyError(name)

    def fingerprint(self) -> str:
        """A stable hash of the definition, to notice when a YAML file changed."""
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def builtin_tasks_dir() -> Path:
    import resources

    return resources.ROOT / "tasks"


def _field_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def load_task_file(path: Path) -> TaskDefinition:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskDefinitionError(source, "(file)", f"cannot be read: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise TaskDefinitionError(source, "(file)", f"is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from exc
    except RecursionError:
        raise TaskDefinitionError(source, "(file)", "is nested too deep to read") from None
    if not isinstance(data, dict):
        raise TaskDefinitionError(source, "(top level)", "the file must hold a mapping of fields")
    try:
        return TaskDefinition.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        problem = first["msg"]
        if first["type"] == "extra_forbidden":
            problem = "unknown field (check its spelling)"
        elif first["type"] == "missing":
            problem = "required field is missing"
        more = len(exc.errors()) - 1
        if more:
            problem += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise TaskDefinitionError(source, _field_path(loc), problem) from exc


@dataclass
class TaskCatalog:
    """All task definitions that this desk knows, by code, with the file each came from, and the
    files that could not be used (one bad file must not take the good tasks down with it)."""

    tasks: dict[str, TaskDefinition]
    sources: dict[str, Path]
    problems: list[TaskDefinitionError] = field(default_factory=list)

    def __getitem__(self, code: str) -> TaskDefinition:
        return self.tasks[code]

    def __iter__(self) -> Iterator[TaskDefinition]:
        return iter(self.tasks.values())

    def __len__(self) -> int:
        return len(self.tasks)


def load_catalog(*folders: Path) -> TaskCatalog:
    catalog = TaskCatalog({}, {})
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            try:
                definition = load_task_file(path)
                if definition.code in catalog.tasks:
                    raise TaskDefinitionError(
                        str(path), "code", f"'{definition.code}' is already defined in {catalog.sources[definition.code]}"
                    )
            except TaskDefinitionError as exc:
                catalog.problems.append(exc)
                continue
            catalog.tasks[definition.code] = definition
            catalog.sources[definition.code] = path
    return catalog
