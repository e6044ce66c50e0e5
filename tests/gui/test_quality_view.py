"""The Dashboard's data-quality view, driven as a lead would: open it, read the artifact table and
the diversity charts, click a term to see its examples, and set an alert threshold that a term's
label share crosses."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import Qt

from tests.conftest import hate_content, hate_output


@pytest.fixture
def quality(qtbot, window, desk, people, hate_model):
    # "not": 26 examples, 24 of them hate (92.3 %); half of the 48 examples are hate.
    texts = ([(f"group{i} are not welcome", "hate") for i in range(24)]
             + [(f"group{i} are not bad", "not hate") for i in range(2)]
             + [(f"group{i} are lovely", "not hate") for i in range(22)])
    for text, label in texts:
        desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                             [hate_output(hate_model, "not hate")])
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    controller = window.dashboard.quality
    with qtbot.waitSignal(controller.spread_ready, timeout=60_000):  # figures first, then the spread job
        qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
        view = window.dashboard_view
        view.sections.tabBar().setCurrentIndex(view.sections.indexOf(view.quality))
    qtbot.waitUntil(lambda: not math.isnan(view.quality.spread_chart.series["mean cosine distance"][0][1])
                    if view.quality.spread_chart.series.get("mean cosine distance") else False, timeout=20_000)
    return window, controller, view.quality


def cells(view, term: str) -> dict[str, str]:
    model = view.artifact_model
    row = view.term_row(term)
    return {model.columns[c].header: model.index(row, c).data() for c in range(len(model.columns))}


def test_the_artifact_table_and_diversity_figures_are_shown(qtbot, quality):
    _window, _controller, view = quality
    assert "Round 1: 48 examples" in view.heading.text()
    row = cells(view, "not")
    # 24 of 26 hate against a base rate of 1/2: z = (24/26 - 0.5) / sqrt(0.25 / 26) = 4.31
    assert (row["Label"], row["Examples"], row["With label"], row["Share"], row["Base rate"]) == (
        "hate", "26", "24", "92.3%", "50.0%")
    assert row["z"] == "4.31"
    assert "not" in view.artifact_model.significant
    distinct = dict(view.distinct_chart.series)
    assert [r for r, _ in distinct["distinct-1"]] == [1]
    assert 0 < distinct["distinct-1"][0][1] < distinct["distinct-2"][0][1] <= 1
    spread = view.spread_chart.series["mean cosine distance"][0][1]
    assert 0 < spread < 2
    assert "Trigger model" in view.spread_chart.legend.text()  # whose embedding space
    # the templates are near-duplicates of each other (h21-dups' index): Ana's rate is shown, and alerted
    qtbot.waitUntil(lambda: view.duplicates.text().startswith("Duplicate rate per writer: Ana Author "),
                    timeout=20_000)
    assert "of Ana Author's 48 examples are near-duplicates" in view.alerts.toolTip()


def test_clicking_a_term_lists_its_examples(qtbot, quality):
    _window, controller, view = quality
    table = view.artifact_table
    row = view.term_row("not")
    rect = table.visualRect(view.artifact_model.index(row, 0))
    with qtbot.waitSignal(controller.term_shown, timeout=20_000):
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert view.examples_title.text().startswith("“not” in round 1: 26 examples")
    assert view.examples.rowCount() == 26
    shown = {(view.examples.item(r, 0).text(), view.examples.item(r, 1).text()) for r in range(26)}
    assert ("group0 are not bad", "not hate") in shown and ("group23 are not welcome", "hate") in shown
    assert view.examples.item(0, 2).text() == "Ana Author"


def test_an_alert_appears_when_the_leads_threshold_is_crossed(qtbot, quality):
    _window, controller, view = quality

    def set_threshold(box, percent: float) -> None:
        with qtbot.waitSignal(controller.updated, timeout=20_000):
            box.selectAll()
            qtbot.keyClicks(box, str(percent))
            qtbot.keyClick(box, Qt.Key.Key_Return)

    assert view.z_threshold.value() == 5.0  # the task's line (QualitySettings' default)
    assert view.duplicate_threshold.value() == 25  # the task's line, not the box's own 30: the settings were applied
    assert "“not”" not in view.alerts.toolTip()  # its z, 4.31, is below 5
    set_threshold(view.z_threshold, 4.3)
    assert view.alerts.isVisible()
    assert "92% of the 26 examples with “not” are labelled hate (base rate 50%): z 4.31, the threshold is 4.3." in (
        view.alerts.toolTip())
    assert controller.thresholds.artifact_z == pytest.approx(4.3)
