"""What the main window's smaller dialogs show: the profile chooser, the import and export dialogs, About.

Built by pure functions from domain objects; Qt-free, tested in tests/views/test_shell.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

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
    team_note: str = ""  # on a desk that syncs with a team server: why nobody else can be chosen here

    @property
    def can_switch(self) -> bool:
        return not self.team_note


@dataclass(frozen=True, slots=True)
class ImportView:
    formats: tuple[Choice, ...]  # description, format name
    tasks: tuple[Choice, ...]  # task name, task code


@dataclass(frozen=True, slots=True)
class ExportView:
    tasks: tuple[Choice, ...]
    current_task: str | None


def profiles_view(people: Iterable[_Person], current_id: str | None, team_server: str | None = None) -> ProfilesView:
    """Everyone at the desk to choose from; on a desk that syncs with ``team_server`` (a server and its
    token), only the working person: there a person is who the server's token says, and their role is
    the server's, so no other profile can be switched to or made up."""
    if team_server is None:
        return ProfilesView(tuple(Choice(f"{p.display_name} — {p.role}", str(p.id)) for p in people), current_id)
    me = tuple(Choice(f"{p.display_name} — {p.role}", str(p.id)) for p in people if str(p.id) == current_id)
    return ProfilesView(me, current_id, roles=(), team_note=(
        f"This desk syncs with {team_server}: you work here as the person your sync token names, with the role "
        "the server gives them. Someone else works with their own token (Sync ▸ Sync settings…)."))


def task_choices(tasks: Iterable[_Task]) -> tuple[Choice, ...]:
    return tuple(Choice(task.name, task.code) for task in tasks)


def import_view(formats: Iterable[_Format], tasks: tuple[Choice, ...]) -> ImportView:
    return ImportView(tuple(Choice(f.description, f.name) for f in formats), tasks)


def about_html(info: dict[str, str], data_dir: object) -> str:
    """The About box: version, build revision, runtimes and the default model's checksum."""
    from html import escape

    revision = escape(info["revision"]) + (f" (built {escape(info['built'])})" if info.get("built") else "")
    return (f"<b>Dynadesk {escape(info['version'])}</b><br>Offline workbench for dynamic adversarial data "
            f"collection.<br><br>Revision: {revision}<br>"
            f"torch {escape(info['torch'])} · onnxruntime {escape(info['onnxruntime'])} · "
            f"Qt (PySide6) {escape(info['qt'])} · Python {escape(info['python'])}<br>"
            f"Default model sha256: <tt>{escape(info['default_model_sha256'])}</tt><br>"
            f"Default model int8: {escape(info.get('default_model_int8', ''))}<br><br>"
            f"Data folder: {escape(str(data_dir))}")
