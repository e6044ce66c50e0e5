"""The main window's menus: the menu bar (File, View, Edit, Example, Round, Profile, Sync and Help, built
once and kept by reference), the window's own entries, the Data table's context menu and the
keyboard-shortcut list. Pages declare their entries (app/gui/pages.py); MainWindow.mount adds them."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox

from app.gui.pages import Menu, MenuAction

SHORTCUTS = [
    ("Ctrl+Enter", "submit the example; in the form, store it"), ("Esc", "back from the form to editing"),
    ("Alt+1, Alt+2, …", "choose your label"), ("Ctrl+Z / Ctrl+Shift+Z", "undo / redo text and label edits"),
    ("Ctrl+Shift+A", "explain: the attribution heatmap"), ("Ctrl+Shift+N", "next context"),
    ("Ctrl+Shift+G", "writing assistant: suggest edits (Alt+↑/↓ choose, Alt+Enter apply, Ctrl+Z undo)"),
    ("Ctrl+Shift+O", "start from a prompt"), ("Ctrl+Shift+E", "perturb the example selected in Data"),
    ("Ctrl+G", "guidelines"), ("Ctrl+1 / Ctrl+2", "Create / Data"), ("Ctrl+F", "find in Data"),
    ("Ctrl+I / Ctrl+E", "import / export"), ("Ctrl+Shift+R", "round settings"),
    ("Ctrl+3", "Validate: 1 correct, 2 incorrect, 3 flag, S skip, Enter confirm / next, R reveal the model"),
    ("Ctrl+4", "Review (leads): filter, 1/2/3 + Enter for a final verdict, return or accept work"),
    ("Ctrl+5", "Dashboard: per-annotator figures, agreement, charts"),
    ("Ctrl+6", "Evaluate: score models on rounds, suites and data sets"),
    ("Ctrl+7", "Suite: the adaptive suite grown from fooling examples; leads generate variants"),
    ("Ctrl+Shift+P", "switch profile"), ("Ctrl++ / Ctrl+-", "larger / smaller text"), ("F1", "this list"),
]


def make_action(window, menu: QMenu, declared: MenuAction) -> QAction:
    """The window's action for a declared menu entry, added to ``menu``."""
    if declared.separator_before:
        menu.addSeparator()
    action = QAction(declared.text, window)
    if declared.shortcut is not None:
        action.setShortcut(QKeySequence(declared.shortcut))
    if declared.more_shortcuts:
        action.setShortcuts([action.shortcut(), *(QKeySequence(key) for key in declared.more_shortcuts)])
    action.triggered.connect(declared.slot)
    if declared.name:
        action.setObjectName(declared.name)
    menu.addAction(action)
    return action


def build_menus(window) -> dict[Menu, QMenu]:
    """The menu bar, every menu in its place (pages add their entries when mounted); the Edit menu's undo
    and redo come from the window's undo stack."""
    menus = {menu: window.menuBar().addMenu(menu.value) for menu in Menu}
    undo = window.undo_stack.createUndoAction(window, "&Undo")
    undo.setShortcut(QKeySequence.StandardKey.Undo)
    undo.setObjectName("undo")
    redo = window.undo_stack.createRedoAction(window, "&Redo")
    redo.setShortcut(QKeySequence.StandardKey.Redo)
    redo.setObjectName("redo")
    menus[Menu.EDIT].addActions([undo, redo])
    return menus


def window_actions(window) -> tuple[MenuAction, ...]:
    """The window's own entries: File, the View menu's first part, Round, Profile and Help."""
    return (
        MenuAction(Menu.FILE, "&Import data set…", window.open_import, "Ctrl+I", "import"),
        MenuAction(Menu.FILE, "&Export…", window.open_export, "Ctrl+E", "export"),
        MenuAction(Menu.FILE, "&Quit", window.close, QKeySequence.StandardKey.Quit, "quit", separator_before=True),
        MenuAction(Menu.VIEW, "&Refresh", window.refresh, QKeySequence.StandardKey.Refresh, "refresh"),
        MenuAction(Menu.VIEW, "Find", window.find_in_data, QKeySequence.StandardKey.Find, "find"),
        MenuAction(Menu.VIEW, "Larger text", lambda: window.change_font_size(+1), QKeySequence.StandardKey.ZoomIn,
                   "larger-text"),
        MenuAction(Menu.VIEW, "Smaller text", lambda: window.change_font_size(-1), QKeySequence.StandardKey.ZoomOut,
                   "smaller-text"),
        MenuAction(Menu.ROUND, "Round &settings, models and contexts…", window.open_rounds, "Ctrl+Shift+R", "rounds"),
        MenuAction(Menu.ROUND, "&Next round: train, compare, promote…", window.open_next_round, name="next-round"),
        MenuAction(Menu.PROFILE, "&Switch or create profile…", window.open_profiles, "Ctrl+Shift+P", "profiles"),
        MenuAction(Menu.HELP, "&Keyboard shortcuts", lambda: show_shortcuts(window), "F1", "shortcuts"),
        MenuAction(Menu.HELP, "&About Dynadesk", window.show_about, name="about"),
    )


def example_actions(window) -> tuple[MenuAction, ...]:
    """The Example menu: the Create page's entries, and those acting on the example selected in Data."""
    workspace, view = window.workspace, window.workspace_view
    return (
        MenuAction(Menu.EXAMPLE, "&Submit", workspace.submit, "Ctrl+Return", "submit", ("Ctrl+Enter",)),
        MenuAction(Menu.EXAMPLE, "Back to editing", lambda: view.show_form(False), "Esc", "back"),
        MenuAction(Menu.EXAMPLE, "&Explain (attribution heatmap)",
                   lambda: workspace.explain(view.explain_target()), "Ctrl+Shift+A", "explain"),
        MenuAction(Menu.EXAMPLE, "Su&ggest edits (writing assistant)", workspace.assist.suggest, "Ctrl+Shift+G",
                   "suggest"),
        MenuAction(Menu.EXAMPLE, "&Next context", workspace.next_context, "Ctrl+Shift+N", "next-context"),
        MenuAction(Menu.EXAMPLE, "Start from a &prompt", workspace.prompt, "Ctrl+Shift+O", "prompt"),
        MenuAction(Menu.EXAMPLE, "&Perturb the selected example", window.start_perturbation, "Ctrl+Shift+E",
                   "perturb"),
        MenuAction(Menu.EXAMPLE, "&Retract the selected example…", lambda: window._author_action("retract"),
                   name="retract"),
        MenuAction(Menu.EXAMPLE, "Re&vise a returned example and submit it again", window.revise_returned,
                   name="revise"),
        MenuAction(Menu.EXAMPLE, "&Flag the selected example…", lambda: window._author_action("flag"), name="flag"),
        MenuAction(Menu.EXAMPLE, "&Discard this draft", workspace.discard, name="discard"),
        MenuAction(Menu.EXAMPLE, "Show &guidelines", view.show_guidelines, "Ctrl+G",
                   "guidelines"),
    )


def table_menu(window, actions: dict[str, QAction], position) -> None:
    """The Data table's context menu: perturb, revise, retract, flag."""
    menu = QMenu(window)
    menu.addAction(actions["perturb"])
    menu.addAction(actions["revise"])
    menu.addSeparator()
    menu.addAction(actions["retract"])
    menu.addAction(actions["flag"])
    menu.exec(window.table.viewport().mapToGlobal(position))


def show_shortcuts(window) -> None:
    """F1: the keyboard shortcuts."""
    rows = "".join(f"<tr><td><b>{keys}</b></td><td>{what}</td></tr>" for keys, what in SHORTCUTS)
    QMessageBox.information(window, "Keyboard shortcuts", f"<table cellspacing=6>{rows}</table>")
