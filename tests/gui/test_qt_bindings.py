"""The Qt bindings themselves: a desk must survive a long session of ordinary widget calls."""

import sys

from PySide6.QtWidgets import QLabel


def test_widget_calls_leave_nones_reference_count_alone(qapp):
    """PySide6 6.12.0 drops a reference to None on every call of a void method. On Python 3.11,
    where None is not immortal, the count reaches zero after a few thousand calls and the
    process aborts ("deallocating None") in the middle of someone's work; pyproject keeps
    that release out. From Python 3.12 None's count is fixed and this holds trivially."""
    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(2000):
        label.setText("x")
        qapp.processEvents()
    assert abs(sys.getrefcount(None) - before) < 200
