"""Review's near-duplicates filter and the lead's data-quality settings, driven as a lead drives
them: choose the filter, see the clusters grouped, narrow by annotator, open an example; set the
task's near-duplicate threshold in the dialog beside the agreement threshold."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.core.quality.settings import QualitySettings
from tests.conftest import hate_content
from tests.gui.test_review import open_review


def clusters_shown(view) -> list[list[str]]:
    tree = view.clusters
    return [[tree.topLevelItem(i).child(j).text(3) for j in range(tree.topLevelItem(i).childCount())]
            for i in range(tree.topLevelItemCount())]


def test_a_lead_groups_near_duplicates_and_sets_the_threshold(qtbot, window, people):
    desk = window.desk
    write = lambda text, who: desk.examples.create(who.id, "hate_speech", hate_content(text, "hate"))  # noqa: E731
    write("Those people are vermin and should all leave", people.author)
    write("those people are VERMIN and should all leave!!", people.val1)
    write("Those people are vermin and should all leave now", people.val2)
    write("Send every one of them back where they came from", people.author)
    write("send every one of them back where they came from.", people.val1)
    write("The weather was lovely at the seaside today", people.val2)
    desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    view = window.review_view
    assert not view.clusters_shown()

    filters = view.filters
    filters.near_duplicates.setFocus()
    filters.near_duplicates.setCurrentIndex(filters.near_duplicates.findData(True))
    qtbot.waitUntil(lambda: view.clusters_shown() and view.clusters.topLevelItemCount() == 2, timeout=10_000)
    assert clusters_shown(view) == [
        ["Those people are •••••• and should all leave", "those people are •••••• and should all leave!!",
         "Those people are •••••• and should all leave now"],  # read masked, as the table is
        ["Send every one of them back where they came from", "send every one of them back where they came from."],
    ]
    first = view.clusters.topLevelItem(0)
    assert first.text(0) == "Cluster 1" and first.text(3) == "3 examples"
    # 33 4-grams of "thosepeoplearevermin…alleave" ("lll" squeezed), 3 more with "now": 33 / 36 = 92%
    assert [first.child(j).text(0) for j in range(3)] == ["original", "100%", "92%"]
    assert [first.child(j).text(2) for j in range(3)] == ["Ana Author", "Vic Validator", "Wen Validator"]
    assert "2 clusters of near-duplicates (similarity ≥ 50%), 5 examples" in view.figures.text()

    view.clusters.setCurrentItem(first.child(2))  # the lead opens one: its detail, as from the table
    qtbot.waitUntil(lambda: "should all leave now" in view.detail.toPlainText(), timeout=5000)
    assert view.selected_ids() and "Wen Validator" in view.detail.toPlainText()

    filters.annotator.setCurrentIndex(filters.annotator.findData(str(people.val2.id)))  # only Wen's clusters
    qtbot.waitUntil(lambda: view.clusters.topLevelItemCount() == 1, timeout=10_000)
    filters.annotator.setCurrentIndex(0)
    qtbot.waitUntil(lambda: view.clusters.topLevelItemCount() == 2, timeout=10_000)

    # the lead raises the threshold: only texts equal after normalisation stay near-duplicates
    qtbot.mouseClick(view.actions_panel.quality_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.quality_dialog is not None and view.quality_dialog.isVisible(), timeout=5000)
    dialog = view.quality_dialog
    assert dialog.near.value() == 50 and dialog.rate.value() == 25 and dialog.token.value() == 5.0
    dialog.near.selectAll()
    qtbot.keyClicks(dialog.near, "95")
    dialog.rate.setValue(10)
    qtbot.mouseClick(dialog.buttons.button(QDialogButtonBox.StandardButton.Ok), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Near-duplicates from 95%" in view.actions_panel.message.text(), timeout=5000)
    assert desk.tasks.settings("hate_speech").quality == QualitySettings(near_threshold=0.95,
                                                                         duplicate_rate_threshold=0.10)
    qtbot.waitUntil(lambda: [len(c) for c in clusters_shown(view)] == [2, 2], timeout=10_000)

    filters.near_duplicates.setCurrentIndex(0)  # back to every example, in the table
    qtbot.waitUntil(lambda: not view.clusters_shown() and view.model.rowCount() == 6, timeout=10_000)


def test_only_a_lead_opens_the_quality_settings(qtbot, window, people):
    desk = window.desk
    desk.switch_person(people.author.id)
    open_review(qtbot, window)
    view = window.review_view
    qtbot.waitUntil(lambda: view.actions_panel.not_lead.isVisible(), timeout=5000)
    assert not view.actions_panel.quality_button.isEnabled()
