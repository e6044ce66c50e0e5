"""Read-only view of one example: its words, label, metadata, model outputs and verdicts."""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeySequence, QShortcut

from app.core.domain import ReviewAction
from app.views.example import ExampleDetailView
from app.views.wellbeing import collapsed_note
from widgets.masked_text import MaskedTextBrowser

FOOLED_COLOUR = "#1e6b35"  # success: the writer found a weakness of the model


def _esc(value) -> str:
    return html.escape("" if value is None else str(value)).replace("\n", "<br>")


def _exact(value) -> str:
    return html.escape("" if value is None else str(value))


class ExampleDetail(MaskedTextBrowser):
    """Shows an example's detail view-model; bidirectional text keeps its own direction. Its texts
    are masked where the reader chose blur (V shows them for this example), and a long one under
    the task's content warning stays closed until the reader opens it."""

    _reveal_key: QShortcut | None = None  # on the class: a ParentChange may come while __init__ runs

    def __init__(self, parent=None):
        super().__init__(parent)
        self._example: ExampleDetailView | None = None
        self._opened = False
        self.anchorClicked.connect(self._link)
        self.show_example(None)

    def _link(self, url) -> None:
        if url.toString() == "read:text" and self._example is not None:
            self._opened = True
            self._render(self._example)

    @property
    def collapsed(self) -> bool:
        blur = None if self._example is None else self._example.blur
        return blur is not None and blur.collapsed and not self._opened

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_V and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            self.toggle_revealed()
            return
        super().keyPressEvent(event)

    def toggle_revealed(self) -> None:
        self.set_revealed(not self.revealed)

    def event(self, event) -> bool:
        # V works from the detail's neighbours too (the Data tab's table beside it); typing a V into a
        # text field there still types it (fields take printable keys before shortcuts)
        parent = self.parentWidget()
        if event.type() == QEvent.Type.ParentChange and parent is not None:
            if self._reveal_key is not None:
                self._reveal_key.setParent(None)
            self._reveal_key = QShortcut(QKeySequence(Qt.Key.Key_V), parent, self.toggle_revealed,
                                         context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        return super().event(event)

    def show_example(self, example: ExampleDetailView | None) -> None:
        same = (example is not None and self._example is not None and example.facts[:1] == self._example.facts[:1])
        self._opened = self._opened and same
        self._example = example
        if example is None:
            self.setHtml("<p style='color:#6b6b6b'>Select an example to see it here.</p>")
            self.apply_blur(None)
            return
        self._render(example)

    def _render(self, example: ExampleDetailView) -> None:
        closed = self.collapsed
        parts = []
        state, comment = example.review_state, example.review_comment
        if state == ReviewAction.RETURNED:
            parts.append("<p style='background:#fdecea; color:#7a1a12; padding:6px'><b>⟲ Returned by a lead:</b> "
                         f"{_esc(comment)}</p>")
        elif state == ReviewAction.ACCEPTED:
            parts.append("<p style='color:#1e6b35'><b>✓ Accepted by a lead</b>"
                         + (f": {_esc(comment)}" if comment else "") + "</p>")
        if example.verdicts_first and example.validations:  # a lead adjudicating reads these first
            items = "".join(f"<li>{_esc(v)}</li>" for v in example.validations)
            parts.append(f"<h4 style='margin-bottom:2px'>Verdicts</h4><ul style='margin-top:0'>{items}</ul>")
        original = example.original
        if closed and example.blur is not None:
            parts.append(f"<p style='background:#fff4e5; color:#6b3d00; padding:6px'>{_esc(collapsed_note(example.blur))}"
                         " <a href='read:text'>Read the text</a></p>")
        elif original is not None:  # a perturbation: the text it edits, before its own
            said = (f"<span style='white-space:pre-wrap'>{_exact(original.text)}</span><br><span style='color:#6b6b6b'>label: {_esc(original.label)}</span>"
                    if original.text is not None else "<i>not on this desk (it arrives with the next sync)</i>")
            parts.append(f"<h4 style='margin-bottom:2px'>Perturbation of</h4><p style='color:#444'>{said}</p>")
        for name, value in example.inputs if not closed else ():
            # as written (spaces kept): the masks are found by the text itself
            parts.append(f"<h4 style='margin-bottom:2px'>{_esc(name)}</h4><p style='white-space:pre-wrap'>{_exact(value)}</p>")
        if example.label is not None:
            parts.append(f"<p><b>Label:</b> {_esc(example.label)}</p>")
        fooled = example.fooled
        if fooled is not None:
            colour = FOOLED_COLOUR if fooled else "#444"  # fooling the model is the writer's success
            parts.append(f"<p><b>Model:</b> <span style='color:{colour}'>{'fooled' if fooled else 'not fooled'}</span></p>")
        for name, value in example.meta:
            colon = "" if name.endswith(("?", ":")) else ":"
            parts.append(f"<p><b>{_esc(name)}{colon}</b> <span style='white-space:pre-wrap'>{_exact(value)}</span></p>")
        if example.outputs:
            rows = "".join(
                f"<tr><td>{_esc(o.model)}</td><td>{_esc(o.label)}</td><td>{_esc(o.probabilities)}</td></tr>"
                for o in example.outputs
            )
            parts.append("<h4>Model outputs</h4><table cellspacing=4><tr><th align=left>model</th>"
                         f"<th align=left>label</th><th align=left>probabilities</th></tr>{rows}</table>")
        if example.validations and not example.verdicts_first:
            items = "".join(f"<li>{_esc(v)}</li>" for v in example.validations)
            parts.append(f"<h4>Verdicts</h4><ul>{items}</ul>")
        facts = "".join(f"<li>{_esc(k)}: {_esc(v)}</li>" for k, v in example.facts)
        parts.append(f"<h4>Record</h4><ul style='color:#444'>{facts}</ul>")
        self.setHtml("".join(parts))
        shown = len(example.shown_texts)  # closed: only the metadata answers are on show, and masked
        self.apply_blur(example.blur, list(range(shown - len(example.meta), shown)) if closed else None)
