"""On a desk that syncs with a team server, a person is who the server's token says: the profile
dialog offers no switch to the lead's or the owner's profile, and no new profile."""

from __future__ import annotations

from PySide6.QtWidgets import QDialogButtonBox, QGroupBox

from tests.gui.team_desk import join_team, team_server  # noqa: F401 (fixture)
from widgets.profile_dialog import ProfileDialog


def open_profile_dialog(qtbot, window) -> ProfileDialog:
    window.named_actions["profiles"].trigger()
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(ProfileDialog)), timeout=10_000)
    return next(d for d in window.findChildren(ProfileDialog) if d.isVisible())


def test_a_team_desk_offers_no_switch_to_another_persons_role(qtbot, window, team_server, modal_log):
    join_team(qtbot, window, team_server, "annotator")
    dialog = open_profile_dialog(qtbot, window)
    listed = [dialog.people.item(i).text() for i in range(dialog.people.count())]
    assert listed == ["Ann Annotator — annotator"]  # not Leo Lead, not Olga Owner
    buttons = dialog.findChild(QDialogButtonBox)
    assert [b.text() for b in buttons.buttons()] == ["Close"]  # no Switch
    assert not any(box.isVisible() for box in dialog.findChildren(QGroupBox) if box.title() == "New profile")
    assert team_server.url in dialog.findChild(type(dialog.problem), "team-note").text()
    dialog.close()

    # whatever reaches the window (an old dialog, a script) cannot make this desk work as the lead
    window._profile_chosen(str(team_server.accounts.lead.id))
    qtbot.waitUntil(lambda: any("sync token" in text for _kind, _title, text in modal_log), timeout=10_000)
    window._profile_created("Made Up", "owner")
    qtbot.waitUntil(lambda: sum("sync token" in text for _kind, _title, text in modal_log) == 2, timeout=10_000)
    assert window.desk.current_person_id == team_server.accounts.annotator.id
    assert window.person_label.text().startswith("Ann Annotator · annotator")
    assert window.desk.people.by_name("Made Up") is None


def test_a_desk_of_its_own_still_switches_profiles(qtbot, window, modal_log):
    lead = window.desk.people.create("Lee Lead", "lead")
    dialog = open_profile_dialog(qtbot, window)
    assert [b.text() for b in dialog.findChild(QDialogButtonBox).buttons()][0] == "Switch"
    dialog.people.setCurrentRow(next(i for i in range(dialog.people.count())
                                     if dialog.people.item(i).text() == "Lee Lead — lead"))
    dialog.findChild(QDialogButtonBox).buttons()[0].click()
    qtbot.waitUntil(lambda: window.person_label.text().startswith("Lee Lead"), timeout=10_000)
    assert window.desk.current_person_id == lead.id
