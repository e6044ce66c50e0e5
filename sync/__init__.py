"""Sync protocol, client and server (Qt-free)."""
