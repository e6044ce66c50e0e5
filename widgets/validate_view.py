"""The Validate tab: one example at a time from the person's queue, and the verdict form.

Shows the example, its context and the author's explanations; for a perturbation, both
halves side by side with the word diff. The target model's output stays hidden until the
verdict is stored when the task says so, and can then be revealed. Views only: the
controller (``app.gui.validate``) feeds typed view-models (``app.views.validate``) and receives
the verdict and skip as signals.
"""

from __future__ import annotations

import html
import uuid
from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.example import VerdictChoice
from app.views.validate import ModelOutputView, QueueView, ValidationItemView
from app.views.wellbeing import BlurView, collapsed_note
from widgets.masked_text import MASK_COLOUR, MaskedTextBrowser
from widgets.perturbation_view import DiffText
from widgets.prediction_panel import ProbabilityBars
from widgets.verdict_form import VerdictForm, tint


def _esc(value) -> str:
    return html.escape("" if value is None else str(value)).replace("\n", "<br>")


def _exact(value, size: str = "medium") -> str:
    """A paragraph that keeps the author's spacing: validators judge the text exactly as written.
    Sizes are relative (CSS keywords), so the user's text size (Ctrl++/Ctrl+-) still applies."""
    return f"<p dir='auto' style='white-space:pre-wrap; font-size:{size}'>{html.escape(value or '')}</p>"


def _masked(value: str, spans) -> str:
    """``value`` as rich text, the spans covered by a bar of the mask's colour (V shows them)."""
    out, last = [], 0
    for start, end in spans:
        out.append(_esc(value[last:start]))
        out.append(f"<span style='background:{MASK_COLOUR.name()}; color:{MASK_COLOUR.name()}'>"
                   f"{_esc(value[start:end])}</span>")
        last = end
    out.append(_esc(value[last:]))
    return "".join(out)


def _text_block() -> MaskedTextBrowser:
    return MaskedTextBrowser()  # the example's texts: masked where the reader chose blur


class ModelOutputBox(QFrame):
    """The target model's output; hidden behind a Reveal button until the verdict is in."""

    reveal_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("model-output")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.heading = QLabel("<b>Target model</b>")
        self.hidden_note = QLabel(objectName="output-hidden", wordWrap=True)
        tint(self.hidden_note, "#00000000", "#6b6b6b").setAutoFillBackground(False)
        self.reveal_button = QPushButton("Reveal the model's output  (R)", objectName="reveal")
        self.reveal_button.clicked.connect(self.reveal_requested)
        self.summary = QLabel(objectName="output-summary", wordWrap=True)
        self.bars = ProbabilityBars()
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.hidden_note)
        layout.addWidget(self.reveal_button)
        layout.addWidget(self.summary)
        layout.addWidget(self.bars)

    def show_hidden(self, can_reveal: bool) -> None:
        self.hidden_note.setText("Hidden until you give your verdict, so that it does not sway you."
                                 if not can_reveal else "Your verdict is stored; you may look now.")
        self.hidden_note.show()
        self.reveal_button.setVisible(can_reveal)
        self.summary.hide()
        self.bars.hide()

    def show_output(self, output: ModelOutputView | None, author_label: str | None) -> None:
        self.hidden_note.hide()
        self.reveal_button.hide()
        self.summary.show()
        if output is None or not output.models:
            self.summary.setText("No model output was stored with this example.")
            self.bars.hide()
            return
        verdict = {True: "<b style='color:#b3261e'>fooled</b>", False: "<b style='color:#1e6b35'>not fooled</b>",
                   None: "–"}[output.fooled]
        lines = [f"{_esc(m.model)}: <b>{_esc(m.label)}</b>" for m in output.models]
        self.summary.setText("<br>".join(lines) + f"<br>Author's label: {_esc(author_label)} · model {verdict}")
        first = output.models[0]
        if first.probabilities and output.labels:
            self.bars.set_values(dict(first.probabilities), list(output.labels), author_label, first.label)
            self.bars.show()
        else:
            self.bars.hide()


class ValidateView(QWidget):
    reveal_requested = Signal()
    next_requested = Signal()
    verdict_submitted = Signal(VerdictChoice)
    skip_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("validate-view")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.status = QLabel(objectName="queue-status", textFormat=Qt.TextFormat.RichText)
        self.warning = tint(QLabel(objectName="content-warning", wordWrap=True, margin=6), "#fff4e5", "#6b3d00")
        self.warning.setFrameShape(QFrame.Shape.Box)
        self.warning.hide()

        # the example
        self.context_title = QLabel("<b>Context</b>")
        self.context = _text_block()
        self.context.setObjectName("context")
        self.written_title = QLabel(objectName="written-title")
        self.written = _text_block()
        self.written.setObjectName("written")
        self.pair = QWidget(objectName="pair")
        self.original = _text_block()
        self.original.setObjectName("pair-original")
        self.edited = _text_block()
        self.edited.setObjectName("pair-edited")
        self.original_title, self.edited_title = QLabel(), QLabel()
        self.diff = DiffText()
        self.diff.setObjectName("pair-diff")
        self.diff.setMaximumHeight(self.diff.fontMetrics().height() * 4)
        pair_layout = QGridLayout(self.pair)
        pair_layout.setContentsMargins(0, 0, 0, 0)
        pair_layout.addWidget(self.original_title, 0, 0)
        pair_layout.addWidget(self.edited_title, 0, 1)
        pair_layout.addWidget(self.original, 1, 0)
        pair_layout.addWidget(self.edited, 1, 1)
        pair_layout.addWidget(QLabel("<b>Edit</b> (struck through: removed; underlined: added)"), 2, 0, 1, 2)
        pair_layout.addWidget(self.diff, 3, 0, 1, 2)
        # a long text under the task's content warning opens closed, until the reader chooses to read it
        self.collapsed = QFrame(objectName="collapsed")
        self.collapsed.setFrameShape(QFrame.Shape.StyledPanel)
        self.collapsed_note = QLabel(objectName="collapsed-note", wordWrap=True)
        self.read_button = QPushButton("Read the text", objectName="read-text")
        self.read_button.clicked.connect(self.open_collapsed)
        collapsed_layout = QVBoxLayout(self.collapsed)
        collapsed_layout.addWidget(self.collapsed_note)
        collapsed_layout.addWidget(self.read_button, 0, Qt.AlignmentFlag.AlignLeft)
        # a generated variant: the seed it was made from, the rule and who generated it
        self.variant_box = QFrame(objectName="variant-of")
        self.variant_box.setFrameShape(QFrame.Shape.StyledPanel)
        tint(self.variant_box, "#f3f0fa")
        self.variant_title = QLabel("<b>Variant of:</b>", objectName="variant-title")
        self.variant_seed = _text_block()
        self.variant_seed.setObjectName("variant-seed")
        self.variant_rule = QLabel(objectName="variant-rule", wordWrap=True)
        self.variant_rule.setTextFormat(Qt.TextFormat.PlainText)
        variant_layout = QVBoxLayout(self.variant_box)
        variant_layout.setContentsMargins(8, 4, 8, 4)
        variant_layout.addWidget(self.variant_title)
        variant_layout.addWidget(self.variant_seed)
        variant_layout.addWidget(self.variant_rule)
        self.variant_box.hide()
        self.blur_note = QLabel(objectName="blur-note", wordWrap=True)
        tint(self.blur_note, "#00000000", "#6b6b6b").setAutoFillBackground(False)
        self.label = QLabel(objectName="author-label", textFormat=Qt.TextFormat.RichText)
        self.explanations = QLabel(objectName="explanations", wordWrap=True, textFormat=Qt.TextFormat.RichText)
        self.explanations.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.addWidget(self.context_title)
        left_layout.addWidget(self.context, 12)  # the context takes the room when there is one
        left_layout.addWidget(self.variant_box)
        left_layout.addWidget(self.written_title)
        left_layout.addWidget(self.written, 2)
        left_layout.addWidget(self.pair, 4)
        left_layout.addWidget(self.collapsed)
        left_layout.addWidget(self.blur_note)
        left_layout.addWidget(self.label)
        self.explanations_box = QFrame(objectName="explanations-box")
        self.explanations_box.setFrameShape(QFrame.Shape.StyledPanel)
        tint(self.explanations_box, "#f4f6fa")
        box = QVBoxLayout(self.explanations_box)
        box.setContentsMargins(8, 4, 8, 4)
        self.explanations_title = QLabel(objectName="explanations-title")
        box.addWidget(self.explanations_title)
        box.addWidget(self.explanations)
        left_layout.addWidget(self.explanations_box)
        left_layout.addStretch(1)  # a short text without context stays compact, at the top

        # the verdict
        self.form = VerdictForm()
        self.form.submitted.connect(self.verdict_submitted)
        self.form.skipped.connect(self.skip_requested)
        self.output = ModelOutputBox()
        self.output.reveal_requested.connect(self.reveal_requested)
        self.stored = QLabel(objectName="stored", wordWrap=True)
        self.next_button = QPushButton("Next example  (Enter)", objectName="next")
        self.next_button.clicked.connect(self.next_requested)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.addWidget(self.form)
        right_layout.addWidget(self.stored)
        right_layout.addWidget(self.next_button)
        right_layout.addWidget(self.output)
        right_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(right)
        splitter = QSplitter(Qt.Orientation.Horizontal, objectName="validate-splitter")
        splitter.addWidget(left)
        splitter.addWidget(scroll)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([760, 480])

        self.empty = QLabel(objectName="queue-empty", alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
        self.pages = QStackedWidget()
        self.pages.addWidget(splitter)
        self.pages.addWidget(self.empty)
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(self.status, 1)
        layout.addLayout(top)
        layout.addWidget(self.warning)
        layout.addWidget(self.pages, 1)
        self._example: ValidationItemView | None = None
        self._revealed = False
        self._explanations_revealed = False
        self.show_empty("Loading the queue…")

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def show_empty(self, message: str) -> None:
        self._example = None
        self.empty.setText(f"<p style='font-size:14pt'>{_esc(message)}</p>")
        self.pages.setCurrentWidget(self.empty)

    def show_queue(self, queue: QueueView) -> None:
        """The queue after a fetch: its status, and the next example or why there is none."""
        self.set_status(queue.status)
        if queue.example is None:
            self.show_empty(queue.empty)
        else:
            self.show_example(queue.example)

    def show_example(self, example: ValidationItemView) -> None:
        self._example = example
        self._revealed = False
        self._explanations_revealed = False
        warning = example.content_warning
        self.warning.setText(f"⚠ Content warning: {_esc(warning)}" if warning else "")
        self.warning.setVisible(bool(warning))
        contexts = example.context
        self.context_title.setVisible(bool(contexts))
        self.context.setVisible(bool(contexts))
        self.context.setHtml("".join(_exact(text) for _name, text in contexts))
        if contexts:
            self.context_title.setText(f"<b>{_esc(contexts[0][0])}</b>")
        # with a context, the written text is short and the context gets the room; without, the text does
        lines = self.written.fontMetrics().lineSpacing()
        self.written.setMaximumHeight(lines * (5 if contexts else 9) + 16)
        self.diff.setMaximumHeight(lines * 3 + 16)
        self.original.setMaximumHeight(lines * (5 if contexts else 9) + 16)
        self.edited.setMaximumHeight(lines * (5 if contexts else 9) + 16)
        pair = example.pair
        self.pair.setVisible(pair is not None)
        self.written.setVisible(pair is None)
        self.written_title.setVisible(pair is None)
        if pair is None:
            written = example.written
            self.written_title.setText(" · ".join(f"<b>{_esc(name)}</b>" for name, _ in written) or "<b>Text</b>")
            self.written.setHtml("".join(_exact(text, "large") for _name, text in written))
        else:
            self.original_title.setText(f"<b>Original</b> · label: {_esc(pair.original.label)}")
            self.edited_title.setText(f"<b>Perturbation (to validate)</b> · label: {_esc(pair.edited.label)}")
            self.original.setHtml(_exact(pair.original.text, "large"))
            self.edited.setHtml(_exact(pair.edited.text, "large"))
            self.diff.show_pieces(pair.diff)
        self._show_variant(example)
        self._apply_blur(example.blur, collapse=True)
        variant = example.variant is not None  # generated: its label is the rule's, its metadata the seed's
        self.explanations_title.setText("<b>The seed's explanations and metadata</b> (the variant names its own "
                                        "group)" if variant else "<b>The author's explanations and metadata</b>")
        self.label.setText(f"Label the rule keeps: <b style='font-size:13pt'>{_esc(example.label)}</b>" if variant
                           else f"Author's {_esc(example.label_name)}: "
                           f"<b style='font-size:13pt'>{_esc(example.label)}</b>")
        self._show_explanations(revealed=False)
        self.form.set_labels(example.labels, example.label)
        self.form.show()
        self.stored.hide()
        self.next_button.hide()
        if example.hide_output:
            self.output.show_hidden(can_reveal=False)
        else:
            self.output.show_output(example.output, example.label)
        self.pages.setCurrentIndex(0)
        self.setFocus()

    def _show_variant(self, example: ValidationItemView) -> None:
        """The seed a generated variant was made from, read as any text of the example (masked, V shows it)."""
        note = example.variant
        self.variant_box.setVisible(note is not None)
        if note is None:
            self.variant_seed.setPlainText("")
            return
        self.variant_seed.setHtml(_exact(note.seed_text))
        self.variant_seed.setMaximumHeight(self.variant_seed.fontMetrics().lineSpacing() * 3 + 12)
        self.variant_rule.setText(f"rule {note.rule} · generated by {note.generated_by} (not anyone's own writing)")

    def _show_explanations(self, revealed: bool) -> None:
        example = self._example
        if example is None:
            return
        masks = example.explanation_masks if not revealed else ()
        self.explanations.setText(
            "".join(f"<p><i>{_esc(q)}</i><br>{_masked(a, masks[i] if i < len(masks) else ())}</p>"
                    for i, (q, a) in enumerate(example.explanations))
            or "<p style='color:#6b6b6b'>The author gave no explanations.</p>")

    def _text_views(self) -> list[tuple[MaskedTextBrowser, list[int]]]:
        """Each text view with the positions of ``blur.texts`` it shows."""
        example = self._example
        if example is None:
            return []
        contexts = len(example.context)
        out = [(self.context, list(range(contexts)))]
        if example.pair is not None:
            out += [(self.original, [contexts]), (self.edited, [contexts + 1])]
        else:
            out.append((self.written, list(range(contexts, contexts + len(example.written)))))
        return out

    def _seed_view(self) -> list[MaskedTextBrowser]:
        """The variant's seed, where the example is one (its masks are its own: ``variant.seed``)."""
        return [self.variant_seed] if self._example is not None and self._example.variant is not None else []

    def _apply_blur(self, blur: BlurView | None, *, collapse: bool = False) -> None:
        revealed = self.words_revealed if not collapse else False
        for view, texts in self._text_views():
            view.apply_blur(blur, texts)
            view.set_revealed(revealed)
        seed = self._example.variant.seed if self._example is not None and self._example.variant else None
        for view in self._seed_view():
            view.apply_blur(seed)
            view.set_revealed(revealed)
        explained = self._example.explanation_masks if self._example is not None else ()
        count = (blur.count if blur is not None else 0) + sum(len(m) for m in explained) + (seed.count if seed else 0)
        self.blur_note.setText(f"{count} word{'s' if count != 1 else ''} masked · point at one to read it, "
                               "or press V to show them on this example" if count else "")
        self.blur_note.setVisible(bool(count))
        if collapse:
            closed = blur is not None and blur.collapsed
            self.collapsed_note.setText(collapsed_note(blur) if closed and blur is not None else "")
            self.collapsed.setVisible(closed)
            if closed:
                for view, _texts in self._text_views():
                    view.hide()
                self.context_title.hide()
                self.written_title.hide()
                self.pair.hide()
                self.variant_box.hide()

    def open_collapsed(self) -> None:
        """The reader chose to read the long text."""
        example = self._example
        if example is None or not self.collapsed.isVisible():
            return
        self.collapsed.hide()
        contexts = bool(example.context)
        self.context_title.setVisible(contexts)
        self.context.setVisible(contexts)
        self.pair.setVisible(example.pair is not None)
        self.written.setVisible(example.pair is None)
        self.written_title.setVisible(example.pair is None)
        self.variant_box.setVisible(example.variant is not None)

    def show_model_words(self, example_id: uuid.UUID, blur: BlurView) -> None:
        """The model's top words arrived for an example: mask them too, if it is still on screen."""
        if self._example is None or self._example.id != example_id:
            return
        self._example = replace(self._example, blur=blur)
        self._apply_blur(blur)

    def toggle_words(self) -> None:
        """V: show (or mask again) the masked words of the example on screen; the next is masked again."""
        revealed = not self.words_revealed
        for view, _texts in self._text_views():
            view.set_revealed(revealed)
        for view in self._seed_view():
            view.set_revealed(revealed)
        self._explanations_revealed = revealed
        self._show_explanations(revealed)

    @property
    def words_revealed(self) -> bool:
        return self._explanations_revealed or any(view.revealed for view, _texts in self._text_views())

    def show_stored(self, text: str) -> None:
        """The verdict is stored: offer the reveal (if hidden) and the next example."""
        self.form.hide()
        self.stored.setText(text)
        self.stored.show()
        self.next_button.show()
        if self._example is not None and self._example.hide_output and not self._revealed:
            self.output.show_hidden(can_reveal=True)
        self.setFocus()

    def reveal(self) -> None:
        if self._example is not None:
            self._revealed = True
            self.output.show_output(self._example.output, self._example.label)

    def show_problem(self, text: str) -> None:
        """The verdict was refused: say why in the form, next to what needs fixing."""
        self.form.show_problem(text)

    def unlock_form(self) -> None:
        """The verdict could not be stored: the form takes input again."""
        self.form.setEnabled(True)

    @property
    def example_id(self) -> uuid.UUID | None:
        return None if self._example is None else self._example.id

    @property
    def output_visible(self) -> bool:
        return self.output.summary.isVisible()

    def keyPressEvent(self, event) -> None:
        key = event.key()
        if self._example is not None and key == Qt.Key.Key_V and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            self.toggle_words()
            return
        if self._example is not None and self.form.isVisible():
            if self.form.handle_key(key):
                return
        elif self._example is not None and self.next_button.isVisible():
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_N):
                self.next_requested.emit()
                return
            if key == Qt.Key.Key_R and self.output.reveal_button.isVisible():
                self.reveal_requested.emit()
                return
        super().keyPressEvent(event)
