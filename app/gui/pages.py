"""How a part of the main window is declared, so that MainWindow mounts every one the same way.

A page (Create, Data, Validate, Review, Dashboard, Evaluate) or a window part without a tab (sync,
returned work) is a :class:`Page`: its controller, its view and tab, its menu actions and its
status-bar widgets. MainWindow builds the menus itself and keeps them, and every action, by
reference; nothing is attached to the window from outside and no menu is looked up by its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from PySide6.QtCore import QObject
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QWidget

from app.core.changes import Changes, Data


class Menu(Enum):
    """The main window's menus, in menu-bar order (the value is the menu's title)."""

    FILE = "&File"
    VIEW = "&View"
    EDIT = "&Edit"
    EXAMPLE = "E&xample"
    ROUND = "&Round"
    PROFILE = "&Profile"
    SYNC = "S&ync"
    HELP = "&Help"


Shortcut = str | QKeySequence.StandardKey | None


@dataclass(frozen=True, slots=True)
class MenuAction:
    """An entry of one of the window's menus; ``name`` is the action's object name (and its key in
    ``MainWindow.named_actions``)."""

    menu: Menu
    text: str
    slot: Callable[[], object]
    shortcut: Shortcut = None
    name: str | None = None
    more_shortcuts: tuple[str, ...] = ()  # besides ``shortcut``
    separator_before: bool = False


@dataclass(frozen=True, slots=True)
class Tab:
    """A page's tab and its View-menu entry (``menu_text``, the title unless given)."""

    title: str
    shortcut: str
    name: str
    menu_text: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """One part of the main window, declared for MainWindow.mount.

    ``shown`` runs when the tab comes into view and when the task changes while it is in view (pages
    load only when looked at); ``task_changed`` runs whenever the task changes; ``changed`` after a
    store that touched any of the data the page ``watches`` (MainWindow routes every store's
    :class:`~app.core.changes.Changes`); ``shutdown`` when the window closes (in the reverse order of
    mounting)."""

    controller: QObject | None
    view: QWidget | None = None
    tab: Tab | None = None
    actions: tuple[MenuAction, ...] = ()
    status: tuple[QWidget, ...] = ()
    shown: Callable[[], object] | None = None
    task_changed: Callable[[], object] | None = None
    watches: Data = Data.NONE
    changed: Callable[[Changes], object] | None = None
    shutdown: Callable[[], object] | None = None
