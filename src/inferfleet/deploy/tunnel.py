"""Reaching a service only its host can reach: a local port forwarded over ssh.

A service bound to another host's loopback (or on a host whose fleet entry
says ``health_from: host``) is not reachable from here, and this machine's
own 127.0.0.1 on that port is somebody else's (L-33). ``probe`` then talks
to it through the deploy's ssh master connection: a port on this machine's
loopback forwarded to the service's address as its host reaches it, closed
again when the probe ends.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import replace

from inferfleet.client.target import Target
from inferfleet.fleetfile.groups import unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.render.endpoints import judged_on_host


def free_local_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def reachable(loaded: LoadedFleet | None, target: Target) -> Iterator[Target]:
    """``target`` as this machine reaches it: itself, or through a forward to its host."""
    if loaded is None or target.service is None:
        yield target
        return
    fleet = loaded.fleet
    service = unit_service(fleet, target.service)
    if not judged_on_host(fleet, service):
        yield target
        return
    from inferfleet.deploy import ssh  # only for a service behind its host

    connector = ssh.SshConnector(ssh.Target.of(service.host, fleet.hosts[service.host]))
    local = free_local_port()
    cancel = connector.forward(local, service.bind, service.port)
    try:
        yield replace(
            target,
            base_url=f"http://127.0.0.1:{local}",
            via=f"{service.bind}:{service.port} on host {service.host}, through ssh",
        )
    finally:
        cancel()
