"""The workspace's views, fed typed view-models as the controllers feed them."""

from dataclasses import replace

from PySide6.QtGui import QColor, QTextCursor

from app.core.text import words
from app.views.create import (
    AttributionChange,
    AttributionView,
    DiffKind,
    DiffPiece,
    MemberView,
    PairSide,
    PairView,
    PredictedView,
    PredictionView,
    SegmentView,
    WordView,
)
from widgets.heatmap import AttributionPanel, score_colour, utf16_offset
from widgets.perturbation_view import PerturbationView
from widgets.prediction_panel import PredictionPanel

LABELS = ["hate", "not hate"]


def test_utf16_offsets_account_for_characters_beyond_the_bmp():
    text = "a😀b👨‍👩‍👧c"
    assert utf16_offset(text, 1) == 1 and utf16_offset(text, 2) == 3
    assert utf16_offset(text, len(text)) == len(text.encode("utf-16-le")) // 2


def test_scores_map_onto_a_diverging_scale():
    assert score_colour(0.0) == QColor(247, 247, 247)
    assert score_colour(1.0) == QColor(178, 24, 43) and score_colour(-1.0) == QColor(33, 102, 172)
    assert score_colour(7.0) == score_colour(1.0)


def test_prediction_panel_shows_fooled_ensembles_and_staleness(qtbot):
    panel = PredictionPanel()
    qtbot.addWidget(panel)
    assert "Type to see" in panel.verdict.text()
    data = PredictionView(
        labels=tuple(LABELS), goal="hate", fooled=True, latency_ms=3.2, device="CPU",
        members=(MemberView("small", "not hate", {"hate": 0.2, "not hate": 0.8}),
                 MemberView("big", "hate", {"hate": 0.6, "not hate": 0.4})),
        combined=MemberView("", "not hate", {"hate": 0.4, "not hate": 0.6}),
    )
    panel.show_prediction(data)
    assert panel.verdict.text() == "Model fooled"
    assert panel.combined.rows == [("hate", 0.4), ("not hate", 0.6)] and panel.combined.goal == "hate"
    assert [title.text() for title, _ in panel.member_bars] == ["small: not hate", "big: hate"]
    assert "3.2 ms" in panel.note.text() and "CPU" in panel.note.text()
    panel.set_stale(True)
    assert not panel.stale.isHidden()
    panel.show_prediction(replace(data, fooled=False, members=data.members[:1], truncated=True))
    assert panel.verdict.text() == "Not fooled yet" and panel.stale.isHidden() and panel.member_bars == []
    assert "only its start was used" in panel.note.text()
    panel.show_prediction(replace(data, fooled=None))
    assert "Choose your label" in panel.verdict.text()
    panel.show_prediction(PredictionView(labels=(), goal=None, fooled=True, answer_f1=0.25,
                                         members=(MemberView("qa", None, {}, "Paris"),),
                                         combined=MemberView("", None, {}, "Paris")))
    assert "Model's answer: Paris" in panel.answer.text() and "F1 0.25" in panel.answer.text()

def attribution_for(text: str, strongest: str, raw=lambda word: 0.1, seen=lambda index: True) -> AttributionView:
    found = words(text)
    return AttributionView(
        (SegmentView("Statement", text, tuple(
            WordView(w.text, w.start, w.end, 1.0 if w.text == strongest else -0.2, raw(w.text), seen(i))
            for i, w in enumerate(found))),),
        target="hate", predicted="hate", method="integrated gradients (32 steps)", latency_ms=80.0,
        convergence_delta=0.004, truncated=False)


def test_the_heatmap_shows_a_weak_effect_pale_and_names_its_scale(qtbot):
    panel = AttributionPanel()
    qtbot.addWidget(panel)
    # the strongest word moves P(hate) by 0.017 only
    data = attribution_for("women are great", "great", raw=lambda word: 0.017 if word == "great" else -0.002)
    panel.show_attribution(replace(data, scale=0.2, units="probability"))
    great = next(w for w in panel.text.words if w["text"] == "great")
    assert great["tooltip"] == "great: +0.017 probability of hate"
    cursor = QTextCursor(panel.text.document())
    cursor.setPosition(great["qt_start"] + 1)
    shade = cursor.charFormat().background().color()
    assert shade == score_colour(0.017 / 0.2) and shade != score_colour(1.0)  # pale, not the strongest colour
    assert panel.legend.end_texts() == ("◀ −0.20 against hate", "for hate +0.20 ▶")
    assert "±0.20" in panel.scale_note.text() and "only +0.017" in panel.scale_note.text()


def test_two_labels_offer_one_heatmap_and_more_labels_a_choice(qtbot):
    panel = AttributionPanel()
    qtbot.addWidget(panel)
    panel.set_labels(LABELS)
    assert panel.target_choice.isHidden() and not panel.fixed_target.isHidden()
    assert "<b>hate</b>" in panel.fixed_target.text()
    panel.set_labels(["entailment", "neutral", "contradiction"])
    assert not panel.target_choice.isHidden() and panel.fixed_target.isHidden()


def test_the_heatmap_draws_the_annotators_own_words_emoji_and_rtl_included(qtbot):
    panel = AttributionPanel()
    qtbot.addWidget(panel)
    text = "They are 🐀🐀 vermin, يا\u200dأخي 👨‍👩‍👧!"
    panel.show_attribution(attribution_for(text, "vermin"))
    shown = [w["shown"] for w in panel.text.words]
    assert shown == [w.text for w in words(text)]  # every span lands on its own word
    assert panel.text.toPlainText() == text
    vermin = next(w for w in panel.text.words if w["text"] == "vermin")
    assert vermin["tooltip"] == "vermin: +1.00 (raw +0.1000)"
    panel.resize(600, 300)
    with qtbot.waitExposed(panel):
        panel.show()
    cursor = QTextCursor(panel.text.document())
    cursor.setPosition(vermin["qt_start"] + 2)
    assert panel.text.tooltip_at(panel.text.cursorRect(cursor).center()) == vermin["tooltip"]
    assert "integrated gradients" in panel.header.text() and "+0.004" in panel.header.text()
    assert panel.legend.target == "hate"
    with qtbot.waitSignal(panel.explain_requested) as request:
        panel.target_choice.setCurrentIndex(1)
        panel.explain_button.click()
    assert request.args == ["goal"]


def test_words_the_model_did_not_read_are_marked(qtbot):
    panel = AttributionPanel()
    qtbot.addWidget(panel)
    data = attribution_for("short text here", "text", seen=lambda index: index < 2)
    panel.show_attribution(replace(data, truncated=True))
    assert "not read by the model" in panel.text.words[-1]["tooltip"]
    assert "Only the start" in panel.header.text()


def test_the_perturbation_view_shows_the_diff_the_flip_and_whether_the_model_followed(qtbot):
    view = PerturbationView()
    qtbot.addWidget(view)
    view.show_pair(data := PairView(
        labels=tuple(LABELS), edit_distance=1, target="hate",
        diff=(DiffPiece(DiffKind.EQUAL, "Women "), DiffPiece(DiffKind.DELETE, "can't"),
              DiffPiece(DiffKind.INSERT, "can"), DiffPiece(DiffKind.EQUAL, " lead")),
        original=PairSide("hate", PredictedView("hate", {"hate": 0.9, "not hate": 0.1})),
        edited=PairSide("not hate", PredictedView("hate", {"hate": 0.7, "not hate": 0.3})),
        changes=(AttributionChange("can't", 0.9, None), AttributionChange("can", None, 0.1),
                 AttributionChange("Women", 0.3, 0.5)),
    ))
    assert view.diff.toPlainText() == "Women can't can lead"
    assert "1 word changed" in view.summary.text() and "(flipped)" in view.summary.text()
    assert "did not follow" in view.summary.text()
    assert [view.changes.item(r, 3).text() for r in range(3)] == ["-0.90", "+0.10", "+0.20"]
    assert view.edited_bars.rows == [("hate", 0.7), ("not hate", 0.3)]
    narrow = view.minimumSizeHint().width()
    view.show_pair(replace(data, scale=0.9, units="probability"))  # raw effects, one scale for both texts
    assert [view.changes.item(r, 3).text() for r in range(3)] == ["-0.900", "+0.100", "+0.200"]
    assert "one scale for both texts" in view.changes_note.text() and "±0.90" in view.changes_note.text()
    assert view.minimumSizeHint().width() == narrow  # the longer note wraps: the window must not widen
