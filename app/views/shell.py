"""What the main window's smaller dialogs show: the profile chooser and the import and export dialogs.

Built by pure functions from domain objects; Qt-free, tested in tests/views/test_shell.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterable, Protocol

from app.core.domain import Role


class _Person(Protocol):
    id: uuid.UUID
    display_name: str
    role: str


class _Task(Protocol):
    code: str
    name: str


class _Format(Protocol):
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class Choice:
    """An entry of a list or combo box: what it shows and the value it stands for."""

    text: str
    value: str


@dataclass(frozen=True, slots=True)
class ProfilesView:
    people: tuple[Choice, ...]  # "name — role", the person's id
    current_id: str | None
    roles: tuple[Role, ...] = tuple(Role)


@dataclass(frozen=True, slots=True)
class ImportView:
    formats: tuple[Choice, ...]  # description, format name
    tasks: tuple[Choice, ...]  # task name, task code


@dataclass(frozen=True, slots=True)
class ExportView:
    tasks: tuple[Choice, ...]
    current_task: str | None


def profiles_view(people: Iterable[_Person], current_id: str | None) -> ProfilesView:
    return ProfilesView(tuple(Choice(f"{p.display_name} — {p.role}", str(p.id)) for p in people), current_id)


def task_choices(tasks: Iterable[_Task]) -> tuple[Choice, ...]:
    return tuple(Choice(task.name, task.code) for task in tasks)


def import_view(formats: Iterable[_Format], tasks: tuple[Choice, ...]) -> ImportView:
    return ImportView(tuple(Choice(f.description, f.name) for f in formats), tasks)
