"""The fleet's status: health, pids, slots, revisions and last bench figures, per service.

``collect(loaded, hosts)`` reads every host and service of the fleet (or of
the named hosts) at once and returns a :class:`FleetStatus`; its
``to_json()`` is the ``inferfleet.status/v2`` document that ``inferfleet
status --json`` prints and the board's page polls. :class:`Collector` keeps
caches between calls for callers that ask often.
"""

from __future__ import annotations

from inferfleet.status.collect import Collector, Options, base_url, collect
from inferfleet.status.model import SCHEMA, FleetStatus, HostRow, Revision, ServiceRow

__all__ = [
    "SCHEMA",
    "Collector",
    "FleetStatus",
    "HostRow",
    "Options",
    "Revision",
    "ServiceRow",
    "base_url",
    "collect",
]
