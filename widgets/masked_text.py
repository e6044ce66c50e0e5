"""A read-only text view that masks words (analyst wellbeing): slurs and the words the
model attributes most to hate are covered by a grey bar until the reader points at one (that word
shows while the pointer is on it) or reveals the example (``set_revealed``, the V key of the
reading views). The masks are character formats over the shown document, so the text itself, its
layout, its direction and its selection are untouched; a new document is masked again."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextBrowser

from app.views.wellbeing import BlurView

MASK_COLOUR = QColor("#aeb3ba")
_SEPARATORS = str.maketrans({"\u2028": "\n", "\u2029": "\n", "\xa0": " "})


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class MaskedTextBrowser(QTextBrowser):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.viewport().setMouseTracking(True)
        self._spans: list[tuple[int, int]] = []  # document positions
        self._revealed = False
        self._hovered: int | None = None

    # what is masked ------------------------------------------------------------------------------
    def apply_blur(self, view: BlurView | None, texts: Sequence[int] | None = None) -> None:
        """Mask ``view``'s spans in the document now shown (set its HTML first). ``texts``: which of
        the view's texts this document shows, in order (all of them when None)."""
        self._spans, self._revealed, self._hovered = [], False, None
        if view is not None and view.masked:
            chosen = [view.texts[i] for i in texts] if texts is not None else list(view.texts)
            plain = self.document().toPlainText().translate(_SEPARATORS)
            found = 0
            for item in chosen:
                text = item.text.translate(_SEPARATORS)
                at = plain.find(text, found) if text else -1
                if at < 0:
                    continue
                base = _utf16_length(plain[:at])
                self._spans += [(base + start, base + end) for start, end in item.spans]
                found = at + len(text)
        self.setToolTip("Masked words: point at one to read it, or press V to show this example's words."
                        if self._spans else "")
        self._paint()

    def set_revealed(self, revealed: bool) -> None:
        """Show (or mask again) every masked word of the document shown."""
        self._revealed = revealed
        self._paint()

    @property
    def revealed(self) -> bool:
        return self._revealed

    def masked_texts(self) -> list[str]:
        """The document's text under each mask that is covering it now (for tests and screen readers)."""
        plain = self.document().toPlainText()
        positions = _positions(plain)
        return [plain[positions[s]:positions[e]] for i, (s, e) in enumerate(self._spans)
                if not self._revealed and i != self._hovered]

    def _paint(self) -> None:
        document = self.document()
        cursor = QTextCursor(document)
        for index, (start, end) in enumerate(self._spans):
            end = min(end, document.characterCount() - 1)
            if start >= end:
                continue
            cursor.setPosition(start)
            cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            shown = self._revealed or index == self._hovered
            fmt = QTextCharFormat()
            if shown:
                fmt.setForeground(self.palette().text())
                fmt.setBackground(QBrush(Qt.BrushStyle.NoBrush))
            else:
                fmt.setForeground(MASK_COLOUR)
                fmt.setBackground(MASK_COLOUR)
            cursor.mergeCharFormat(fmt)

    # pointing at a word shows it -----------------------------------------------------------------
    def span_at(self, boundary: int) -> int | None:
        """The mask at a hit-test boundary: a word's end counts (the right half of its last letter)."""
        return next((i for i, (s, e) in enumerate(self._spans) if s <= boundary <= e), None)

    def mouseMoveEvent(self, event) -> None:
        super().mouseMoveEvent(event)
        if not self._spans:
            return
        # an exact hit: the pointer on a masked word's characters, not in the blank beside a line's end
        point = event.position().toPoint()
        at = self.document().documentLayout().hitTest(
            QPointF(point.x() + self.horizontalScrollBar().value(), point.y() + self.verticalScrollBar().value()),
            Qt.HitTestAccuracy.ExactHit)
        hovered = self.span_at(at) if at >= 0 else None
        if hovered != self._hovered:
            self._hovered = hovered
            self._paint()

    def leaveEvent(self, event) -> None:
        super().leaveEvent(event)
        if self._hovered is not None:
            self._hovered = None
            self._paint()


def _positions(plain: str) -> list[int]:
    """``positions[utf16 index]``: the Python index of that code unit's character."""
    out = []
    for index, char in enumerate(plain):
        out += [index] * (2 if ord(char) > 0xFFFF else 1)
    out.append(len(plain))
    return out
