"""Every role on a team desk (a server configured, the person's token) in every view: each tab, each
menu action and each dashboard section, visible or not, enabled or not, and what data it shows.

The matrix is the table below. The test enumerates the main window's tabs, menu actions and dashboard
sections and fails on one without a row, so a new view cannot arrive without saying who sees what."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from app.core.services.target_models import register_model
from tests.conftest import hate_content, hate_output
from tests.gui.team_desk import join_team, team_server  # noqa: F401 (fixture)
from tests.gui.test_team_profiles import open_profile_dialog

ROLES = ("annotator", "lead", "owner")
ON, OFF, HIDDEN = "enabled", "disabled", "hidden"
EVERYONE = {role: ON for role in ROLES}
LEADS = {"annotator": HIDDEN, "lead": ON, "owner": ON}

# what each role sees of a view's data (checked by SHOWS below; "" where the view shows the same to all)
OWN_AND_TEAM, EVERYONE_ROWS = "own row + team totals", "every person's row"
TABS = {  # tab title: (state per role, data per role)
    "Create": (EVERYONE, {}),
    "Data": (EVERYONE, {}),
    "Validate": (EVERYONE, {}),
    "Review": (EVERYONE, {"annotator": "browse only: verdicts, return and accept locked",
                          "lead": "acts", "owner": "acts"}),
    "Dashboard": (EVERYONE, {"annotator": OWN_AND_TEAM, "lead": EVERYONE_ROWS, "owner": EVERYONE_ROWS}),
    "Evaluate": (EVERYONE, {}),
    "Suite": (EVERYONE, {"annotator": "reads; generating locked", "lead": "generates", "owner": "generates"}),
}
SECTIONS = {  # the Dashboard's sections
    "Figures": (EVERYONE, {}),
    "Data quality": (EVERYONE, {}),
    "Writing assistant": (EVERYONE, {}),
    "Exposure (care)": (EVERYONE, {"annotator": "own time; limits read-only", "lead": "team; sets limits",
                                   "owner": "team; sets limits"}),
}
ACTIONS = {  # menu action's object name: (state per role, data per role)
    "import": (EVERYONE, {}), "export": (EVERYONE, {}), "quit": (EVERYONE, {}),
    "refresh": (EVERYONE, {}), "find": (EVERYONE, {}), "larger-text": (EVERYONE, {}), "smaller-text": (EVERYONE, {}),
    "tab-create": (EVERYONE, {}), "tab-data": (EVERYONE, {}), "tab-validate": (EVERYONE, {}),
    "tab-review": (EVERYONE, {}), "tab-dashboard": (EVERYONE, {}), "dashboard-refresh": (EVERYONE, {}),
    "tab-evaluate": (EVERYONE, {}), "tab-suite": (EVERYONE, {}),
    "undo": ({role: OFF for role in ROLES}, {}), "redo": ({role: OFF for role in ROLES}, {}),  # nothing typed yet
    "submit": (EVERYONE, {}), "back": (EVERYONE, {}), "explain": (EVERYONE, {}), "suggest": (EVERYONE, {}),
    "next-context": (EVERYONE, {}), "prompt": (EVERYONE, {}), "perturb": (EVERYONE, {}), "retract": (EVERYONE, {}),
    "revise": (EVERYONE, {}), "flag": (EVERYONE, {}), "discard": (EVERYONE, {}), "guidelines": (EVERYONE, {}),
    "rounds": (EVERYONE, {}),
    "next-round": (LEADS, {}),
    "proposals": (EVERYONE, {}),
    "profiles": (EVERYONE, {role: "only themself, no switch, no new profile" for role in ROLES}),
    "sync-now": (EVERYONE, {}), "sync-settings": (EVERYONE, {}),
    "shortcuts": (EVERYONE, {}), "about": (EVERYONE, {}),
    "break-take": (EVERYONE, {}), "break-snooze": (EVERYONE, {}),  # act on a break prompt when one is up
}


def state(visible: bool, enabled: bool) -> str:
    return HIDDEN if not visible else ON if enabled else OFF


def found_tabs(window) -> dict[str, str]:
    tabs = window.tabs
    return {tabs.tabText(i).replace("&", ""): state(tabs.isTabVisible(i), tabs.isTabEnabled(i))
            for i in range(tabs.count())}


def found_actions(window) -> dict[str, str]:
    actions = [a for menu in window.menus.values() for a in menu.actions() if not a.isSeparator()]
    unnamed = [a.text() for a in actions if not a.objectName()]
    assert not unnamed, f"menu actions without an object name (give them one, and a row): {unnamed}"
    return {a.objectName(): state(a.isVisible(), a.isEnabled()) for a in actions}


def found_sections(window) -> dict[str, str]:
    sections = window.dashboard_view.sections
    return {sections.tabText(i): state(sections.isTabVisible(i), sections.isTabEnabled(i))
            for i in range(sections.count())}


def shows_review(qtbot, window, role):
    window.tabs.setCurrentWidget(window.review_view)
    panel = window.review_view.actions_panel
    qtbot.waitUntil(lambda: panel.not_lead.text() != "", timeout=20_000)
    if panel.accept_button.isEnabled():
        assert not panel.not_lead.isVisible()
        return "acts"
    assert panel.not_lead.isVisible() and not panel.return_button.isEnabled()
    return "browse only: verdicts, return and accept locked"


def shows_dashboard(qtbot, window, role):
    view = window.dashboard_view
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        window.tabs.setCurrentWidget(view)
    rows = [view.annotator_model.index(r, 0).data() for r in range(view.annotator_model.rowCount())]
    me = window.desk.people.get(window.desk.current_person_id).display_name
    if rows == [me, "Team (everyone)"]:
        return OWN_AND_TEAM
    assert {me, "Carla Colleague"} <= set(rows) and "Team (everyone)" not in rows, rows
    return EVERYONE_ROWS


def shows_exposure(qtbot, window, role):
    view = window.dashboard_view
    window.tabs.setCurrentWidget(view)
    with qtbot.waitSignal(window.dashboard.exposure.updated, timeout=20_000):
        view.sections.setCurrentWidget(view.exposure)
    exposure = view.exposure
    return "team; sets limits" if exposure.save.isEnabled() else "own time; limits read-only"


def shows_profiles(qtbot, window, role):
    dialog = open_profile_dialog(qtbot, window)
    try:
        listed = [dialog.people.item(i).text() for i in range(dialog.people.count())]
        buttons = [b.text() for b in dialog.findChild(QDialogButtonBox).buttons()]
        me = window.desk.people.get(window.desk.current_person_id).display_name
        assert buttons == ["Close"] and len(listed) == 1 and listed[0].startswith(me), (listed, buttons)
        return "only themself, no switch, no new profile"
    finally:
        dialog.close()


def shows_suite(qtbot, window, role):
    with qtbot.waitSignal(window.suite.tree_shown, timeout=20_000):
        window.tabs.setCurrentWidget(window.suite_view)
    return "generates" if window.suite_view.generate_button.isEnabled() else "reads; generating locked"


SHOWS = {("tab", "Review"): shows_review, ("tab", "Suite"): shows_suite, ("tab", "Dashboard"): shows_dashboard,
         ("section", "Exposure (care)"): shows_exposure, ("action", "profiles"): shows_profiles}


@pytest.fixture
def colleague_work(window, team_server, hate_trigger_model_dir):
    """Examples of the person at the desk and of a colleague (as a pull brings them), so per-person
    figures have someone else's to show or withhold."""
    def add(me_id):
        desk = window.desk
        record = register_model(desk, hate_trigger_model_dir, task_code="hate_speech", name="Matrix model")
        colleague = desk.people.create("Carla Colleague", "annotator")
        for author, text in ((me_id, "they should all leave"), (colleague.id, "my neighbours are lovely")):
            desk.examples.create(author, "hate_speech", hate_content(text, "hate"), [hate_output(record, "not hate")])
        window.refresh()
    return add


@pytest.mark.parametrize("role", ROLES)
def test_every_role_in_every_view(qtbot, window, team_server, colleague_work, role, modal_log):
    join_team(qtbot, window, team_server, role)
    colleague_work(window.desk.current_person_id)
    tabs, actions, sections = found_tabs(window), found_actions(window), found_sections(window)
    assert set(tabs) == set(TABS), "a tab without a row in TABS (or a row for a tab that is gone)"
    assert set(actions) == set(ACTIONS), f"menu actions without a row: {set(actions) ^ set(ACTIONS)}"
    assert set(sections) == set(SECTIONS), "a dashboard section without a row in SECTIONS"
    for kind, table, found in (("tab", TABS, tabs), ("action", ACTIONS, actions), ("section", SECTIONS, sections)):
        for name, (states, data) in table.items():
            assert found[name] == states[role], (kind, name, role)
            if role in data:
                assert (kind, name) in SHOWS, f"no check of what {kind} {name} shows"
                assert SHOWS[(kind, name)](qtbot, window, role) == data[role], (kind, name, role)
