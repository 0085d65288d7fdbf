"""Where inferfleet keeps its cache (builds, models) and its state (records, logs).

Both live outside any checkout (L-41) and follow the XDG conventions through
platformdirs. ``INFERFLEET_CACHE_DIR`` and ``INFERFLEET_STATE_DIR`` override
them (tests isolate state per test this way); a host's ``state_dir`` in the
fleet file applies when no override is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from inferfleet.fleetfile.fleet import Host


def cache_dir() -> Path:
    override = os.environ.get("INFERFLEET_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("inferfleet"))


def state_dir(host: Host | None = None) -> Path:
    override = os.environ.get("INFERFLEET_STATE_DIR")
    if override:
        return Path(override).expanduser()
    if host is not None:
        return Path(host.state_dir).expanduser()
    return Path(platformdirs.user_state_dir("inferfleet"))


def logs_dir(host: Host | None = None) -> Path:
    return state_dir(host) / "logs"
