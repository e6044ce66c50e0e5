"""The Dashboard tab driven as a team lead would: open it with Ctrl+5, watch it update after
new verdicts, click chart bars and lines to filter, sort, and export CSV and PNG."""

from __future__ import annotations

import csv

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QComboBox, QFileDialog

from tests.simulation import small_team


def column(model, header: str) -> int:
    return next(i for i, c in enumerate(model.columns) if c.header == header)


def names(model) -> list[str]:
    """The first column (annotator, group) of a figure table, top to bottom."""
    return [model.index(row, 0).data() for row in range(model.rowCount())]


def table(model, header: str) -> dict[str, str]:
    """A figure table's first column -> its text in the column ``header``."""
    c = column(model, header)
    return {model.index(row, 0).data(): model.index(row, c).data() for row in range(model.rowCount())}


def submitted(model) -> dict[str, int]:
    """Name -> submitted examples, for rows with any."""
    return {name: int(value.replace(",", "")) for name, value in table(model, "Submitted").items()
            if value not in ("0", "—")}


def cell(view, name: str, header: str) -> str:
    return table(view.annotator_model, header)[name]


@pytest.fixture
def dashboard(qtbot, window, desk, people, target_model):
    team = small_team(desk, people, target_model)
    window.desk.switch_person(people.lead.id)  # per-person figures are for leads
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.dashboard_view
    return window, team


def test_ctrl_5_opens_the_dashboard_with_the_per_annotator_figures(dashboard):
    window, _team = dashboard
    view = window.dashboard_view
    assert view.summary.text() == "7 examples"  # six submitted, one retracted
    assert cell(view, "Ana Author", "Submitted") == "5"
    assert cell(view, "Ana Author", "MER") == "60.0%" and cell(view, "Ana Author", "vMER") == "20.0%"
    assert cell(view, "Ana Author", "Rejected") == "50.0%" and cell(view, "Ana Author", "Retracted") == "16.7%"
    assert cell(view, "Ana Author", "Median time") == "55 s" and cell(view, "Ana Author", "Edit dist.") == "2.0"
    assert cell(view, "Ana Author", "Per hour") == "51.4"
    assert cell(view, "Xia Validator", "Agreement") == "50.0%"
    assert cell(view, "Xia Validator", "MER") == "—"
    assert names(view.breakdown_model) == ["Round 1", "Round 2"]
    assert "Fleiss' κ" in view.agreement_label.text() and "Krippendorff's α" in view.agreement_label.text()
    assert set(view.facet_charts) == {"hate_type", "target_groups"}  # both distributions, not only the first field
    assert view.label_chart.keys == ["not hate", "hate"]


def test_the_dashboard_updates_after_new_verdicts(qtbot, dashboard, desk, people):
    window, team = dashboard
    view = window.dashboard_view
    assert cell(view, "Wen Validator", "Verdicts") == "2"
    # Two more verdicts on a4: Wen agrees, Xia disagrees; then Vic's third decides it.
    desk.validation.validate(team.a4.id, people.val2.id, "correct")
    desk.validation.validate(team.a4.id, people.val3.id, "incorrect", corrected_label="hate", reason="it is hateful")
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        window.dashboard.refresh()
    assert cell(view, "Wen Validator", "Verdicts") == "3"
    assert cell(view, "Ana Author", "Rejected") == "50.0%"  # a4 is not decided yet
    desk.validation.validate(team.a4.id, people.val1.id, "correct")
    desk.validation.validate(team.a4.id, people.lead.id, "correct", mode="lead")
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.keyClick(window, Qt.Key.Key_F5)  # View ▸ Refresh refreshes the dashboard too
    # a4 decided correct: Ana now has three decided (one rejected) and two validated fooling examples
    assert cell(view, "Ana Author", "Rejected") == "33.3%" and cell(view, "Ana Author", "vMER") == "40.0%"
    assert cell(view, "Xia Validator", "Agreement") == "33.3%"  # 1 of 3 decided
    assert cell(view, "Vic Validator", "Verdicts") == "4"
    assert table(view.breakdown_model, "Backlog")["Round 1"] == "2"


def test_clicking_chart_elements_filters_the_table(qtbot, dashboard, people):
    window, _team = dashboard
    view = window.dashboard_view

    def click(chart, point):
        with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
            qtbot.mouseClick(chart.plot.viewport(), Qt.MouseButton.LeftButton, pos=point)

    # Round 2's bar in the fooling-rate chart: only Vic wrote there.
    click(view.round_chart, view.round_chart.bar_center(1))
    assert view.round_combo.currentText() == "Round 2"
    assert list(submitted(view.annotator_model)) == ["Vic Validator"]
    assert view.summary.text() == "1 of 7 examples"
    click(view.round_chart, view.round_chart.bar_center(1))  # clicking it again takes the filter off
    assert view.round_combo.currentText() == "All" and view.summary.text() == "7 examples"

    # A target-group bar: 'immigrants' is a1 only.
    groups = view.facet_charts["target_groups"]
    click(groups, groups.bar_center(groups.keys.index("immigrants")))
    assert view.facet_combos["target_groups"].currentText() == "immigrants"
    assert submitted(view.annotator_model) == {"Ana Author": 1}
    assert groups.selected == {"immigrants"}
    qtbot.mouseClick(view.clear_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.summary.text() == "7 examples", timeout=20_000)

    # A label bar, then a point on an annotator's MER line.
    click(view.label_chart, view.label_chart.bar_center(view.label_chart.keys.index("hate")))
    assert view.label_combo.currentText() == "hate"
    assert submitted(view.annotator_model) == {"Ana Author": 2}
    click(view.label_chart, view.label_chart.bar_center(view.label_chart.keys.index("hate")))
    vic = people.val1.id.hex
    click(view.mer_chart, view.mer_chart.point_position(vic, -1))
    assert view.author_combo.currentText() == "Vic Validator"
    assert names(view.annotator_model) == ["Vic Validator"]


def test_sorting_and_choosing_people_for_the_time_charts(qtbot, dashboard, people):
    window, _team = dashboard
    view = window.dashboard_view
    header = view.annotator_table.horizontalHeader()
    agreement = column(view.annotator_model, "Agreement")
    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(header.sectionViewportPosition(agreement) + 5, 5))
    values = [r.cells[agreement].sort for r in view.annotator_model.rows]
    present = [v for v in values if v is not None]
    assert present == sorted(present) or present == sorted(present, reverse=True)
    assert values[len(present):] == [None] * (len(values) - len(present))  # empty figures last
    assert {s for s in view.mer_chart.lines} == {people.author.id.hex, people.val1.id.hex}
    # Selecting Ana's row draws only her lines.
    row = names(view.annotator_model).index("Ana Author")
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        view.annotator_table.selectRow(row)
    assert set(view.mer_chart.lines) == {people.author.id.hex}
    assert view.vmer_chart.lines[people.author.id.hex][1][-1] == pytest.approx(0.2)


def test_breakdown_selector_and_export(qtbot, dashboard, tmp_path, monkeypatch):
    window, _team = dashboard
    view = window.dashboard_view
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        view.breakdown_combo.setCurrentIndex(view.breakdown_combo.findData("target_groups"))
    assert {name: int(n) for name, n in table(view.breakdown_model, "Submitted").items()} == {"women": 2, "immigrants": 1}
    # The export menu, as a user picks a file name in the dialog.
    target = tmp_path / "groups.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), "CSV files (*.csv)"))
    view.export_menu.findChild(type(view.export_menu.actions()[0]), "export-breakdown").trigger()
    groups = {r["Group"]: r for r in csv.DictReader(target.open(encoding="utf-8"))}
    assert groups["women"]["Submitted"] == "2"
    chart = tmp_path / "backlog.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(chart), "PNG images (*.png)"))
    view.export_menu.findChild(type(view.export_menu.actions()[0]), "export-backlog").trigger()
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with qtbot.waitSignal(window.dashboard.exported, timeout=20_000) as later:
        written = window.dashboard.export_to("all", tmp_path / "all")
    names = sorted(p.name for p in written)
    # The other breakdowns follow from the worker, for the same filter.
    assert sorted(p.name for p in later.args[0]) == [
        "breakdown-hate_type.csv", "breakdown-label.csv", "breakdown-model.csv", "breakdown-round.csv"]
    with (tmp_path / "all" / "breakdown-round.csv").open(encoding="utf-8") as handle:
        assert {r["Group"]: r["Submitted"] for r in csv.DictReader(handle)} == {"Round 1": "5", "Round 2": "1"}
    assert "annotators.csv" in names and "breakdown-target_groups.csv" in names
    assert {"chart-mer_over_time.png", "chart-hate_type.png", "chart-target_groups.png", "chart-labels.png",
            "chart-fooling_by_round.png", "chart-backlog.png", "chart-vmer_over_time.png"} <= set(names)
    assert all(p.stat().st_size > 1000 for p in written if p.suffix == ".png")
    with (tmp_path / "all" / "annotators.csv").open(encoding="utf-8") as handle:
        assert any(r["Annotator"] == "Ana Author" and r["Submitted"] == "5" for r in csv.DictReader(handle))


def test_period_choices_and_another_task(qtbot, dashboard):
    window, _team = dashboard
    view = window.dashboard_view
    # A backlog point picks the examples submitted in its period; changing the label keeps that period.
    xs, _ys = view.backlog_chart.lines["backlog"]
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.mouseClick(view.backlog_chart.plot.viewport(), Qt.MouseButton.LeftButton,
                         pos=view.backlog_chart.point_position("backlog", len(xs) - 1))
    assert view.period_combo.currentText().startswith("Submitted ")
    assert view.summary.text() == "7 examples"  # all were submitted in the last period
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        view.label_combo.setCurrentIndex(view.label_combo.findData("hate"))
    assert view.period_combo.currentText().startswith("Submitted ") and view.summary.text() == "3 of 7 examples"
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        view.period_combo.setCurrentIndex(2)  # last 30 days
    assert view.period_combo.count() == 4 and view.summary.text() == "3 of 7 examples"
    # Another task: filters reset; NLI has no examples here and no metadata charts.
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
    qtbot.waitUntil(lambda: view.summary.text() == "0 examples" and view.label_combo.currentText() == "All",
                    timeout=20_000)
    assert view.facet_charts == {} and view.annotator_model.rows == ()
    assert view.label_combo.count() == 4  # All + entailment, neutral, contradiction


def tick_labels(chart, side: str) -> list[str]:
    """The labels the axis draws now (labels that would be cut off are not drawn)."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _axis, _ticks, texts = chart.plot.getAxis(side).generateDrawSpecs(painter)
    finally:
        painter.end()
    return [text for _rect, _flags, text in texts]


def test_day_one_axes_show_dates_and_times_and_whole_counts(qtbot, dashboard):
    """small_team writes every example within seconds: the time axes still read as dates and times
    (never fractions of a second), and counts are never 0.5 of an example."""
    import re

    window, _team = dashboard
    view = window.dashboard_view
    window.resize(1366, 768)
    time_charts = (view.mer_chart, view.vmer_chart, view.backlog_chart)
    # an axis makes room for its labels when it is first laid out and drawn: wait for that, not for a time
    qtbot.waitUntil(lambda: all(tick_labels(chart, "bottom") for chart in time_charts), timeout=10_000)
    for chart in time_charts:
        labels = tick_labels(chart, "bottom")
        assert all(re.fullmatch(r"(\d{1,2} [A-Z][a-z]{2} )?\d{2}:\d{2}", label) for label in labels), labels
        assert re.match(r"\d{1,2} [A-Z][a-z]{2} ", labels[0]), labels  # the day is named
    counts = [(view.backlog_chart, "left"), (view.label_chart, "left")] + [
        (chart, "bottom") for chart in view.facet_charts.values()]
    for chart, side in counts:
        labels = tick_labels(chart, side)
        assert labels and all(re.fullmatch(r"\d[\d,]*", label) for label in labels), (chart.title.text(), labels)


def test_the_dashboard_warns_when_the_team_cannot_reach_the_agreement_threshold(qtbot, window):
    desk = window.desk  # one profile so far (from the login name); a lead makes a team of two
    lead = desk.people.create("Lee Lead", "lead")
    window._profile_chosen(str(lead.id))
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    view = window.dashboard_view
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert view.threshold_warning.isVisible()
    assert "needs 3 matching verdicts" in view.threshold_warning.text()
    assert "at most 1 can validate" in view.threshold_warning.text()

    qtbot.keyClick(window, Qt.Key.Key_4, Qt.KeyboardModifier.ControlModifier)  # the lead lowers it in Review
    panel = window.review_view.actions_panel
    qtbot.waitUntil(lambda: panel.threshold.isEnabled() and panel.threshold.value() == 3, timeout=5000)
    panel.threshold.setValue(1)
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        panel.threshold_button.click()
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert not view.threshold_warning.isVisible()


def test_an_annotator_sees_their_own_row_and_the_team_totals_only(qtbot, window, desk, people, target_model, tmp_path):
    """Per-person performance is for leads: an annotator's dashboard has their own row, the team's
    totals, their own line over time and no colleague to pick in the Author filter; the export of the
    table holds the same two rows."""
    small_team(desk, people, target_model)
    window.desk.switch_person(people.author.id)
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    view = window.dashboard_view
    assert names(view.annotator_model) == ["Ana Author", "Team (everyone)"]
    assert cell(view, "Ana Author", "MER") == "60.0%"
    assert cell(view, "Team (everyone)", "Submitted") == "6"  # the whole team's six submitted examples
    assert {line.name for line in window.dashboard.figures.time_series} <= {"Ana Author"}
    authors = view.findChild(QComboBox, "dashboard-author")
    assert [authors.itemText(i) for i in range(authors.count())][1:] == ["Ana Author"]
    written = window.dashboard.export_to("annotators", tmp_path / "a.csv")
    with written[0].open(encoding="utf-8") as handle:
        assert [row[0] for row in csv.reader(handle)][1:] == ["Ana Author", "Team (everyone)"]

    window.desk.switch_person(people.lead.id)  # a lead sees everyone
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        window.dashboard.refresh()
    assert {"Ana Author", "Vic Validator", "Wen Validator", "Xia Validator"} <= set(names(view.annotator_model))
    assert "Team (everyone)" not in names(view.annotator_model)
