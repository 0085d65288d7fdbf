"""Where the operator's Prometheus runs, so its scrape targets are rendered as it reaches them.

Prometheus is not deployed by inferfleet; ``render`` writes its config. A
target's address depends on where the scraper sits: on the target's own host
a server bound to every address is reached on loopback; on another host, at
that host's address; and from a container on a bridged network (podman's
default) on the target's host, only at the host gateway name podman adds to
the container's ``/etc/hosts``: the host's loopback is the container's own,
and the host's LAN address is not forwarded there (only published ports are
DNATed, L-57).
"""

from __future__ import annotations

from typing import Literal

from inferfleet.fleetfile.base import Name, Strict


class PrometheusSite(Strict):
    """The Prometheus that scrapes the fleet: its host and its network."""

    host: Name
    """The fleet host Prometheus runs on."""
    network: Literal["host", "container"] = "host"
    """host: a process, or a container on the host's network (it reaches its host's loopback);
    container: a container on a bridged network (podman's default), which reaches services on its
    own host only at host.containers.internal, never at loopback or the host's LAN address
    (L-57)."""


class Monitoring(Strict):
    prometheus: PrometheusSite | None = None
    """Where Prometheus runs; the rendered scrape targets are the addresses it reaches (default: as
    another host of the fleet reaches each service)."""
