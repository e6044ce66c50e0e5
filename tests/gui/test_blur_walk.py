"""The blur walk: every reading view, opened on examples that carry slurs, with the reader's blur
on, shows no slur unmasked. The check is generic: it collects every text a view shows (labels,
item views' display text and tooltips, read-only text boxes less what their masks cover) and
looks for the task's blur words in it, so a view added to ``VIEWS`` is checked the same way."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QAbstractItemView, QLabel, QPlainTextEdit, QTextEdit, QWidget

from app.core.wellbeing.blur import lexicon_spans
from app.core.wellbeing.profile import WellbeingProfile
from app.core.wellbeing.word_list import bundled_words
from tests.conftest import hate_content, hate_output
from widgets.masked_text import MASK_COLOUR, MaskedTextBrowser

# Slurs in their disguises, in the text and in the author's explanation.
SLURRED = ("Those v3rmin and p a r a s i t e s should go back", "They are vermin, plainly")
MAX_ROWS = 200  # an item view's rows read (the fixture has a handful)


def _plain(text: str) -> str:
    """A label's text as read: rich text as plain, less what a mask-coloured span covers."""
    if "<" not in text:
        return text
    text = re.sub(rf"<span style='[^']*color:{MASK_COLOUR.name()}[^']*'>(.*?)</span>",
                  lambda m: "•" * len(m.group(1)), text)
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def _item_texts(view: QAbstractItemView) -> Iterator[str]:
    model = view.model()
    if model is None:
        return

    def columns(parent) -> int:
        try:
            return model.columnCount(parent)
        except TypeError:  # a list model keeps it private: one column
            return 1

    def walk(parent) -> Iterator[str]:
        for row in range(min(model.rowCount(parent), MAX_ROWS)):
            for column in range(columns(parent)):
                index = model.index(row, column, parent)
                for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
                    value = index.data(role)
                    if isinstance(value, str):
                        yield _plain(value)
                if column == 0 and model.rowCount(index) > 0:  # a tree's branch
                    yield from walk(index)

    from PySide6.QtCore import QModelIndex

    yield from walk(QModelIndex())


def _box_text(box: QTextEdit | QPlainTextEdit) -> str:
    """What a read-only text box shows: its text less what its masks cover now."""
    text = box.toPlainText()
    if isinstance(box, MaskedTextBrowser):
        for masked in box.masked_texts():
            text = text.replace(masked, "•" * len(masked), 1)
    return text


def shown_texts(root: QWidget) -> Iterator[tuple[str, str]]:
    """(where, text) for every text ``root`` shows a reader: visible labels, item views, read-only text
    boxes, and the tooltips of all of them. The writer's own editor (editable) is not a reading view."""
    widgets = [root, *root.findChildren(QWidget)]
    for widget in widgets:
        if not widget.isVisibleTo(root.window()) and widget is not root:
            continue
        where = f"{type(widget).__name__}#{widget.objectName()}"
        if widget.toolTip():
            yield where + " tooltip", _plain(widget.toolTip())
        if isinstance(widget, QLabel):
            yield where, _plain(widget.text())
        elif isinstance(widget, QAbstractItemView):
            yield from ((where, text) for text in _item_texts(widget))
        elif isinstance(widget, (QTextEdit, QPlainTextEdit)) and widget.isReadOnly():
            yield where, _box_text(widget)


def unmasked(root: QWidget) -> list[tuple[str, str]]:
    """(where, the slur) for every blur word a reader sees in ``root``."""
    words = bundled_words("hate_speech")
    return [(where, text[start:end]) for where, text in shown_texts(root)
            for start, end, _entry in lexicon_spans(text, words)]


# --- the reading views: each opens itself on the fixture and returns what to walk ---------------

def _validate(qtbot, window, _examples) -> QWidget:
    from tests.gui.test_validate import open_validate, wait_for_example

    open_validate(qtbot, window)
    wait_for_example(qtbot, window.validate_view)
    qtbot.waitUntil(lambda: bool(window.validate_view.written.masked_texts()), timeout=5000)
    return window.validate_view


def _review(qtbot, window, examples) -> QWidget:
    from tests.gui.test_review import open_review, shown_ids

    open_review(qtbot, window)
    view = window.review_view
    qtbot.waitUntil(lambda: len(shown_ids(view)) == len(examples), timeout=5000)
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: bool(view.detail.masked_texts()), timeout=5000)
    return view


def _clusters(qtbot, window, _examples) -> QWidget:
    from tests.gui.test_review import open_review

    open_review(qtbot, window)
    view = window.review_view
    filters = view.filters
    filters.near_duplicates.setCurrentIndex(filters.near_duplicates.findData(True))
    qtbot.waitUntil(lambda: view.clusters_shown() and view.clusters.topLevelItemCount() > 0, timeout=10_000)
    return view


def _data(qtbot, window, _examples) -> QWidget:
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    window.refresh()
    qtbot.waitUntil(lambda: window.table_model.rowCount() > 0, timeout=5000)
    window.table.selectRow(0)
    qtbot.waitUntil(lambda: bool(window.detail.masked_texts()), timeout=5000)
    return window.data_page


def _quality_terms(qtbot, window, _examples) -> QWidget:
    """The Dashboard's data-quality section, with the examples behind a term listed."""
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    view = window.dashboard_view
    view.sections.tabBar().setCurrentIndex(view.sections.indexOf(view.quality))
    with qtbot.waitSignal(window.dashboard.quality.term_shown, timeout=20_000):
        window.dashboard.quality.show_term("vermin")
    assert view.quality.examples.rowCount() > 0
    return view.quality


def _artifact_terms(qtbot, window, _examples) -> QWidget:
    """The Dashboard's artifact table: its terms (a slur is a strong one), its heading and its alerts."""
    window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
    qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    view = window.dashboard_view
    view.sections.tabBar().setCurrentIndex(view.sections.indexOf(view.quality))
    view.quality.z_threshold.setValue(1.0)  # low enough that the term raises an alert
    qtbot.waitUntil(lambda: view.quality.term_row("vermin") >= 0, timeout=20_000)
    qtbot.waitUntil(lambda: view.quality.alerts.isVisibleTo(view), timeout=20_000)
    return view.quality


def _suite(qtbot, window, examples) -> QWidget:
    """The Suite tab: a slurred example the lead decided valid (it fooled the target) is a seed; a variant of it
    (as the suite stores generated ones) is listed under it."""
    from tests.gui.test_suite import open_suite, select_seed

    desk, seed = window.desk, examples[-1]
    lead = desk.current_person_id
    desk.lead.adjudicate(seed.id, lead, "correct")
    origin = {"kind": "variant", "seed_id": str(seed.id), "rule": "identity_swap", "edit_type": "group_swap_protected",
              "generated_by": str(lead), "seed_text": seed.text}
    content = hate_content(SLURRED[0].replace("back", "away"), "hate", target_groups=["refugees"],
                           label_explanation=SLURRED[1])
    desk.adaptive_suite.store_variants("hate_speech", lead, [(content, [], origin)])
    view = open_suite(qtbot, window)
    view.tree.expandAll()
    select_seed(qtbot, window, view)
    qtbot.waitUntil(lambda: view.variants.rowCount() == 1 and bool(view.seed_text.masked_texts()), timeout=5000)
    return view


VIEWS: dict[str, Callable[..., QWidget]] = {
    "Validate": _validate,
    "Review": _review,
    "Review's near-duplicate clusters": _clusters,
    "Data": _data,
    "Dashboard's data quality, a term's examples": _quality_terms,
    "Dashboard's artifact terms and alerts": _artifact_terms,
    "Suite (a seed and its variants; last: it decides an example)": _suite,
}


def _slurred_examples(desk, people, target_model) -> list:
    made = []
    # enough for the artifact table to test "vermin" against the other label (written first: the
    # slurred ones below are the newest, the first row of each list)
    for text in ("The vermin are back", "Vermin everywhere, they say", "Keep the vermin out", "vermin, vermin",
                 "More vermin today", "Our neighbours are kind", "Kind people live here", "The neighbours are lovely"):
        label = "hate" if "ermin" in text else "not hate"
        made.append(desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                                         [hate_output(target_model, "not hate")]))
    for text in (SLURRED[0], SLURRED[0] + "!", "Send the vermin home"):
        content = hate_content(text, "hate", target_groups=["Muslims"], label_explanation=SLURRED[1])
        made.append(desk.examples.create(people.author.id, "hate_speech", content,
                                         [hate_output(target_model, "not hate")]))
    return made


def test_the_walker_finds_a_slur_in_each_kind_of_widget(qtbot):
    from PySide6.QtWidgets import QListWidget, QVBoxLayout

    root = QWidget()
    qtbot.addWidget(root)
    layout = QVBoxLayout(root)
    label, items, box = QLabel("<b>they are vermin</b>"), QListWidget(), QTextEdit()
    items.addItem("clean")
    items.item(0).setToolTip("p a r a s i t e s")
    box.setPlainText("v3rmin")
    box.setReadOnly(True)
    for widget in (label, items, box):
        layout.addWidget(widget)
    root.show()
    assert sorted(s for _w, s in unmasked(root)) == ["p a r a s i t e s", "v3rmin", "vermin"]
    box.setReadOnly(False)  # an editor is the writer's own text
    label.hide()
    assert [s for _w, s in unmasked(root)] == ["p a r a s i t e s"]


def test_no_reading_view_shows_a_slur_unmasked_with_blur_on(qtbot, window, people, target_model):
    desk = window.desk
    examples = _slurred_examples(desk, people, target_model)
    desk.switch_person(people.lead.id)  # a lead reads every view
    desk.settings.wellbeing = {str(people.lead.id): WellbeingProfile(blur_validating=True, blur_browsing=True)}
    leaks = {}
    for name, open_view in VIEWS.items():
        found = unmasked(open_view(qtbot, window, examples))
        if found:
            leaks[name] = found
    assert not leaks, leaks


def test_the_evaluations_failing_cases_pass_the_walk(qtbot, data_dir, hate_model, tmp_path, modal_log):
    """The Evaluate tab's failing cases (HateCheck texts the target gets wrong), read with blur on."""
    import csv

    from tests.gui.conftest import close_window, open_window
    from tests.gui.test_evaluation import WAIT, choose_suite, open_tab, tick_only

    suite = tmp_path / "suite.csv"
    with open(suite, "w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["", "functionality", "case_id", "test_case", "label_gold", "target_ident", "direction",
                      "focus_words", "focus_lemma", "ref_case_id", "ref_templ_id", "templ_id", "case_templ"])
        for i, text in enumerate([SLURRED[0], "They are all v3rmin", "Those p a r a s i t e s again",
                                  "I love bananas"]):
            out.writerow([i, "derog_dehum_h", i + 1, text, "hateful", "women", "general", "", "", "", "",
                          i + 1, text])
    window = open_window(qtbot, data_dir)
    try:
        ws = window.workspace
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        desk = window.desk
        desk.settings.wellbeing = {str(desk.current_person_id): WellbeingProfile(blur_browsing=True)}
        view = open_tab(qtbot, window)
        tick_only(view, "round:1")
        choose_suite(qtbot, view, suite)
        with qtbot.waitSignal(window.evaluation.finished, timeout=WAIT):
            qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: view.failing.rowCount() >= 3, timeout=WAIT)  # the slurred cases fail
        view.result_tabs.setCurrentIndex(4)
        assert not unmasked(view)
        assert any("•" in view.failing.item(r, 3).text() for r in range(view.failing.rowCount()))
        # the HTML report written beside it lists the same failing cases: masked there too
        [report] = (desk.root / "evaluations").glob("*/report.html")
        page = html.unescape(re.sub(r"<[^>]+>", " ", report.read_text(encoding="utf-8")))
        assert "failing case" in page and "•" in page
        assert not lexicon_spans(page, bundled_words("hate_speech"))
    finally:
        close_window(window)
