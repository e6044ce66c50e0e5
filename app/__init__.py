"""Dynadesk application core. Everything here except ``app.gui`` is Qt-free."""

__version__ = "0.1.0"
