"""Which fleet file a verb reads when none is given: the one rule, one place.

Order (what a user of git, ruff or docker compose expects):

1. ``--file`` / the file argument, when given;
2. ``$INFERFLEET_FILE`` (a path that does not exist is an error, never skipped);
3. ``./fleet.yaml``;
4. the nearest ``fleet.yaml`` in a parent directory. The walk stops at the top
   of the git repository the current directory is in (the directory holding
   ``.git``): a fleet file above your repository belongs to something else.
   Outside any repository it stops at the filesystem root.

Only ``up`` and ``show`` fall back to the embedded example fleet, and say so
on stderr; every other verb without a fleet file exits 2 with the fix. The
module is plain ``os``/``pathlib`` so the host-side apply (``deploy/noop``)
can share the file name without importing the schema.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

FLEET_FILE_NAME = "fleet.yaml"
ENV_VAR = "INFERFLEET_FILE"


def discover(
    cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, str] | None:
    """The fleet file to use and how it was found (for notes), or None when there is none.

    Raises ``FileNotFoundError`` when ``$INFERFLEET_FILE`` names no file (the
    caller turns it into a usage error naming the variable).
    """
    environ = os.environ if env is None else env
    named = environ.get(ENV_VAR, "")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise FileNotFoundError(named)
        return path, f"${ENV_VAR}"
    here = (cwd or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / FLEET_FILE_NAME
        if candidate.is_file():
            return (Path(FLEET_FILE_NAME) if folder == here else candidate), (
                "the current directory" if folder == here else "a parent directory"
            )
        if (folder / ".git").exists():
            return None  # the top of this git repository: look no higher
    return None


def default_fleet_path(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The discovered fleet file, else ``./fleet.yaml`` (whose absence the loader reports).

    For verbs that must stay light (``plan``, ``deploy``, ``apply``); a
    ``$INFERFLEET_FILE`` naming no file is returned as is, so the loader's
    "fleet file not found" names it.
    """
    try:
        found = discover(cwd, env)
    except FileNotFoundError as exc:
        return Path(str(exc))
    return Path(FLEET_FILE_NAME) if found is None else found[0]
