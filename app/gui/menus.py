"""The main window's menus and actions: File, View, Edit, Example, Round, Profile and Help, the Data
table's context menu and the keyboard-shortcut list."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox

SHORTCUTS = [
    ("Ctrl+Enter", "submit the example; in the form, store it"), ("Esc", "back from the form to editing"),
    ("Alt+1, Alt+2, …", "choose your label"), ("Ctrl+Z / Ctrl+Shift+Z", "undo / redo text and label edits"),
    ("Ctrl+Shift+A", "explain: the attribution heatmap"), ("Ctrl+Shift+N", "next context"),
    ("Ctrl+Shift+O", "start from a prompt"), ("Ctrl+Shift+E", "perturb the example selected in Data"),
    ("Ctrl+G", "guidelines"), ("Ctrl+1 / Ctrl+2", "Create / Data"), ("Ctrl+F", "find in Data"),
    ("Ctrl+I / Ctrl+E", "import / export"), ("Ctrl+Shift+R", "round settings"),
    ("Ctrl+3", "Validate: 1 correct, 2 incorrect, 3 flag, S skip, Enter confirm / next, R reveal the model"),
    ("Ctrl+4", "Review (leads): filter, 1/2/3 + Enter for a final verdict, return or accept work"),
    ("Ctrl+5", "Dashboard: per-annotator figures, agreement, charts"),
    ("Ctrl+6", "Evaluate: score models on rounds, suites and data sets"),
    ("Ctrl+Shift+P", "switch profile"), ("Ctrl++ / Ctrl+-", "larger / smaller text"), ("F1", "this list"),
]


def add_action(window, menu, text: str, slot, shortcut=None, name: str | None = None) -> QAction:
    """An action of the window in ``menu``, with its shortcut and object name."""
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    action.triggered.connect(slot)
    if name:
        action.setObjectName(name)
    menu.addAction(action)
    return action


def build_menus(window) -> None:
    """The menu bar; the actions tests and other parts trigger are kept on the window."""
    file_menu = window.menuBar().addMenu("&File")
    window.import_action = add_action(window, file_menu, "&Import data set…", window.open_import, "Ctrl+I", "import")
    window.export_action = add_action(window, file_menu, "&Export…", window.open_export, "Ctrl+E", "export")
    file_menu.addSeparator()
    add_action(window, file_menu, "&Quit", window.close, QKeySequence.StandardKey.Quit)
    window.view_menu = view_menu = window.menuBar().addMenu("&View")
    add_action(window, view_menu, "&Refresh", window.refresh, QKeySequence.StandardKey.Refresh, "refresh")
    add_action(window, view_menu, "Find", lambda: window.filter_bar.search.setFocus(), QKeySequence.StandardKey.Find)
    add_action(window, view_menu, "Larger text", lambda: window.change_font_size(+1), QKeySequence.StandardKey.ZoomIn,
               "larger-text")
    add_action(window, view_menu, "Smaller text", lambda: window.change_font_size(-1), QKeySequence.StandardKey.ZoomOut,
               "smaller-text")
    edit_menu = window.menuBar().addMenu("&Edit")
    undo = window.undo_stack.createUndoAction(window, "&Undo")
    undo.setShortcut(QKeySequence.StandardKey.Undo)
    redo = window.undo_stack.createRedoAction(window, "&Redo")
    redo.setShortcut(QKeySequence.StandardKey.Redo)
    edit_menu.addActions([undo, redo])
    example_menu = window.menuBar().addMenu("E&xample")
    workspace = window.workspace
    window.submit_action = add_action(window, example_menu, "&Submit", workspace.submit, "Ctrl+Return", "submit")
    window.submit_action.setShortcuts([QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")])
    add_action(window, example_menu, "Back to editing", lambda: window.workspace_view.show_form(False), "Esc", "back")
    add_action(window, example_menu, "&Explain (attribution heatmap)",
               lambda: workspace.explain(window.workspace_view.attribution.target_choice.currentData()),
               "Ctrl+Shift+A", "explain")
    add_action(window, example_menu, "&Next context", workspace.next_context, "Ctrl+Shift+N", "next-context")
    add_action(window, example_menu, "Start from a &prompt", workspace.prompt, "Ctrl+Shift+O", "prompt")
    window.perturb_action = add_action(window, example_menu, "&Perturb the selected example", window.start_perturbation,
                                       "Ctrl+Shift+E", "perturb")
    window.retract_action = add_action(window, example_menu, "&Retract the selected example…",
                                       lambda: window._author_action("retract"), None, "retract")
    window.revise_action = add_action(window, example_menu, "Re&vise a returned example and submit it again",
                                      window.revise_returned, None, "revise")
    window.flag_action = add_action(window, example_menu, "&Flag the selected example…",
                                    lambda: window._author_action("flag"), None, "flag")
    add_action(window, example_menu, "&Discard this draft", workspace.discard, None, "discard")
    add_action(window, example_menu, "Show &guidelines",
               lambda: window.workspace_view.side.setCurrentWidget(window.workspace_view.guidelines), "Ctrl+G",
               "guidelines")
    view_menu.addSeparator()
    add_action(window, view_menu, "&Create", lambda: window.tabs.setCurrentWidget(window.workspace_view), "Ctrl+1", "tab-create")
    add_action(window, view_menu, "&Data", lambda: window.tabs.setCurrentIndex(window.tabs.indexOf(window.data_page)),
               "Ctrl+2", "tab-data")
    round_menu = window.menuBar().addMenu("&Round")
    add_action(window, round_menu, "Round &settings, models and contexts…", window.open_rounds, "Ctrl+Shift+R", "rounds")
    profile_menu = window.menuBar().addMenu("&Profile")
    add_action(window, profile_menu, "&Switch or create profile…", window.open_profiles, "Ctrl+Shift+P", "profiles")
    help_menu = window.menuBar().addMenu("&Help")
    add_action(window, help_menu, "&Keyboard shortcuts", lambda: show_shortcuts(window), "F1", "shortcuts")
    add_action(window, help_menu, "&About Dynadesk", window.show_about)
    window.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    window.table.customContextMenuRequested.connect(lambda position: table_menu(window, position))


def table_menu(window, position) -> None:
    """The Data table's context menu: perturb, revise, retract, flag."""
    menu = QMenu(window)
    menu.addAction(window.perturb_action)
    menu.addAction(window.revise_action)
    menu.addSeparator()
    menu.addAction(window.retract_action)
    menu.addAction(window.flag_action)
    menu.exec(window.table.viewport().mapToGlobal(position))


def show_shortcuts(window) -> None:
    """F1: the keyboard shortcuts."""
    rows = "".join(f"<tr><td><b>{keys}</b></td><td>{what}</td></tr>" for keys, what in SHORTCUTS)
    QMessageBox.information(window, "Keyboard shortcuts", f"<table cellspacing=6>{rows}</table>")
