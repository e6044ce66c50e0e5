"""The Dynadesk sync server: FastAPI app (``app``), storage (``db``, ``models``), rules (``store``)."""
