"""The Dashboard's "Writing assistant" section, driven as a lead would: open the dashboard with
Ctrl+5, pick the section, read each writer's figures with and without the assistant, switch to
per round with the keyboard, and narrow to one annotator with the dashboard's own filter."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core.assist.types import Assistance
from app.core.services.rounds import parse_settings
from tests.conftest import hate_content, hate_output

SUGGESTED = Assistance(arm="on", session=1, applied=True, generator="obfuscation", edit_type="leetspeak",
                       applied_text="they are all v3rmin")


@pytest.fixture
def ab_round(desk, people, target_model):
    """An A-B round: Ana writes 4 assisted (2 with a suggestion applied) and 2 unassisted examples,
    Vic 1 unassisted; one example from before the assistant; lead decisions on some."""
    desk.rounds.update(desk.tasks.round("hate_speech").id, people.lead.id, settings=parse_settings({"assistant": "ab"}))
    on, off = Assistance(arm="on", session=1), Assistance(arm="off", session=2)

    def write(author, text, model_label, seconds, assistance, decision=None):
        example = desk.examples.create(author.id, "hate_speech", hate_content(text, "hate"),
                                       [hate_output(target_model, model_label)], time_spent_ms=seconds * 1000,
                                       assistance=assistance)
        if decision == "correct":
            desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")
        elif decision == "incorrect":
            desk.validation.validate(example.id, people.lead.id, "incorrect", corrected_label="not hate",
                                     reason="not hateful", mode="lead")
        return example

    ana, vic = people.author, people.val1
    write(ana, "they are all v3rmin", "not hate", 30, SUGGESTED, "correct")
    write(ana, "they are all v3rmin, truly", "not hate", 60, SUGGESTED, "incorrect")
    write(ana, "those people again", "hate", 90, on)
    write(ana, "you know the kind", "not hate", 120, on)
    write(ana, "they should all go", "not hate", 40, off, "correct")
    write(ana, "they ruin everything", "hate", 20, off)
    write(vic, "people like that are a plague", "hate", 50, off)
    write(ana, "written before the assistant", "not hate", 10, None)


def open_section(qtbot, window):
    view = window.dashboard_view
    if window.tabs.currentWidget() is not view:
        window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
        with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
            qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    tabs = view.sections.tabBar()
    index = next(i for i in range(tabs.count()) if tabs.tabText(i) == "Writing assistant")
    qtbot.mouseClick(tabs, Qt.MouseButton.LeftButton, pos=tabs.tabRect(index).center())
    assert view.sections.currentWidget() is view.assistant
    qtbot.waitUntil(lambda: view.assistant.table.rowCount() > 0, timeout=20_000)
    return view.assistant


def rows(panel) -> list[tuple[str, ...]]:
    return [tuple(panel.cell(r, c) for c in range(panel.table.columnCount())) for r in range(panel.table.rowCount())]


def test_a_lead_reads_the_split_per_annotator_and_per_round(qtbot, window, ab_round, people):
    window.desk.switch_person(people.lead.id)
    panel = open_section(qtbot, window)
    assert [panel.table.horizontalHeaderItem(c).text() for c in range(panel.table.columnCount())] == [
        "Annotator", "Arm", "Examples", "Applied", "MER", "vMER", "Rejected", "Time / example"]
    assert rows(panel) == [
        ("All in view", "Assisted", "4", "2 (50.0%)", "75.0%", "25.0%", "50.0%", "75 s"),
        ("", "Unassisted", "3", "–", "33.3%", "33.3%", "0.0%", "40 s"),
        ("Ana Author", "Assisted", "4", "2 (50.0%)", "75.0%", "25.0%", "50.0%", "75 s"),
        ("", "Unassisted", "2", "–", "50.0%", "50.0%", "0.0%", "30 s"),
        ("Vic Validator", "Unassisted", "1", "–", "0.0%", "0.0%", "–", "50 s"),
    ]
    headline = panel.headline.text()
    assert "MER 75.0% vs 33.3% (+41.7 points" in headline and "applied to 2 of 4 assisted examples" in headline
    assert "mostly noise" in headline
    assert panel.note.text().startswith("1 example in view was written without the assistant")

    panel.by.setFocus()
    qtbot.keyClick(panel.by, Qt.Key.Key_Down)  # per round
    qtbot.waitUntil(lambda: panel.table.horizontalHeaderItem(0).text() == "Round", timeout=20_000)
    assert [r[:3] for r in rows(panel)[2:]] == [("Hate speech · round 1", "Assisted", "4"), ("", "Unassisted", "3")]


def test_the_dashboard_annotator_filter_narrows_the_split(qtbot, window, ab_round, people):
    window.desk.switch_person(people.lead.id)  # only a lead's filter offers each writer
    panel = open_section(qtbot, window)
    view = window.dashboard_view
    combo = view.author_combo
    combo.setCurrentIndex(combo.findData(people.val1.id.hex))  # the dashboard's own filter
    # earlier requests may still answer first: the newest one's split is the one that stays
    qtbot.waitUntil(lambda: [r[:3] for r in rows(panel)] == [("All in view", "Unassisted", "1"),
                                                             ("Vic Validator", "Unassisted", "1")], timeout=20_000)
    assert "No assisted examples in view" in panel.headline.text()


def test_the_split_is_computed_only_while_its_section_can_be_seen(qtbot, window, ab_round, desk, people,
                                                                     target_model):
    window.desk.switch_person(people.lead.id)  # a lead reads each writer's row
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    computed = []
    window.dashboard.assistant.updated.connect(lambda: computed.append(True))
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert computed == [] and window.dashboard_view.assistant.table.rowCount() == 0  # Figures is the open section
    desk.examples.create(people.val1.id, "hate_speech", hate_content("one more while hidden", "hate"),
                         [hate_output(target_model, "not hate")], assistance=Assistance(arm="off", session=1))
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        window.dashboard.refresh_thoroughly()  # what the window does after a store or a sync
    assert computed == []  # the Figures section is still the one shown
    panel = open_section(qtbot, window)  # shown: computed now, with what was stored meanwhile
    assert ("Vic Validator", "Unassisted", "2") in [r[:3] for r in rows(panel)]


def test_an_annotator_reads_only_their_own_row_and_the_team_totals(qtbot, window, ab_round, people):
    """Per-person figures are for leads: Ana sees her own split and everyone's together, not Vic's."""
    window.desk.switch_person(people.author.id)
    panel = open_section(qtbot, window)
    assert [r[0] for r in rows(panel)] == ["All in view", "", "Ana Author", ""]
    assert rows(panel)[:2] == [
        ("All in view", "Assisted", "4", "2 (50.0%)", "75.0%", "25.0%", "50.0%", "75 s"),
        ("", "Unassisted", "3", "–", "33.3%", "33.3%", "0.0%", "40 s")]  # the team's totals, Vic's example in them
    panel.by.setFocus()
    qtbot.keyClick(panel.by, Qt.Key.Key_Down)  # per round: team totals already
    qtbot.waitUntil(lambda: panel.table.horizontalHeaderItem(0).text() == "Round", timeout=20_000)
    assert [r[:3] for r in rows(panel)[2:]] == [("Hate speech · round 1", "Assisted", "4"), ("", "Unassisted", "3")]
