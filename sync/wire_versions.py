"""Which sync protocol version brought each record kind and field onto the wire.

A desk and a server that speak different protocol versions (at most one apart) exchange records in the
older one's shape: what the older side does not know is left out of what it is sent, and counted for the
person to see, never silently dropped. Everything the wire carries that protocol 1 did not must be listed
here, optional with a default, so that a protocol-1 payload still validates.
"""

from __future__ import annotations

PROTOCOL_VERSION = 2
LOWEST_PROTOCOL = 1  # one version back: the previous release's

# Record kinds (the ``record`` tag) that appeared after protocol 1: kind -> the version that brought it.
RECORD_SINCE: dict[str, int] = {}

# Fields of known record kinds that appeared after protocol 1: (kind, field) -> the version that brought it.
FIELD_SINCE: dict[tuple[str, str], int] = {
    ("ChangesResponse", "held_back"): 2,
}
