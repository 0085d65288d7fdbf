"""The API key inferfleet sends to a server that requires one (L-58).

Which servers require a key and the names it goes by are decided in
:mod:`inferfleet.render.service_keys`; this module finds the value here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from inferfleet.checks.secret_scan import parse_env_file
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.groups import unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.render.service_keys import front_variable, key_variable


def service_key(
    loaded: LoadedFleet, name: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """The key to send to service ``name``, or None when this machine has none.

    On the service's own host, the value of its runtime's variable in its
    ``secrets_env`` file; else (or when that file is not readable here, e.g.
    root's) the environment's ``INFERFLEET_KEY_<SERVICE>``.
    """
    fleet = loaded.fleet
    try:
        service = unit_service(fleet, name)
    except KeyError:
        return None
    local = fleet.hosts[service.host].is_local(service.host)
    return key_on_host(fleet, name, loaded.root, environ) if local else _environ(name, environ)


def key_on_host(
    fleet: Fleet, name: str, root: Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """Service ``name``'s key as its own host reads it: its ``secrets_env`` file (paths
    relative to ``root``, the fleet file's folder), else ``INFERFLEET_KEY_<SERVICE>``."""
    variable = key_variable(fleet, name)
    declared = unit_service(fleet, name).secrets_env  # a group: its router's

    if variable is not None and declared is not None:
        path = Path(declared).expanduser()  # this machine is the host: its home
        try:
            values = parse_env_file(path if path.is_absolute() else root / path)
        except FleetError:
            values = {}
        if values.get(variable):
            return values[variable]
    return _environ(name, environ)


def _environ(name: str, environ: Mapping[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get(front_variable(name)) or None


def bearer(key: str | None) -> dict[str, str]:
    """The ``Authorization`` header for ``key``, or none."""
    return {} if key is None else {"Authorization": f"Bearer {key}"}
