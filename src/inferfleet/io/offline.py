"""Offline: no network request beyond the fleet's own hosts.

``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE``), read now as
huggingface_hub reads it, and a verb's ``--offline`` (:func:`offline_mode`,
which sets it for the verb's duration). Every client made for remote URLs
(:func:`inferfleet.io.http.client` with ``purpose="remote"``: the Hub, its
mirrors and CDNs, a URL a user gives) refuses to send while it holds, so no
path can forget to ask; huggingface_hub's own calls are guarded where they are
made. ``--offline`` also keeps pip and uv off their index (``PIP_NO_INDEX``,
``UV_OFFLINE``: a wheelhouse in ``PIP_FIND_LINKS`` still serves).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# What --offline sets for the verb's duration (and its subprocesses).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}


def offline() -> bool:
    """Whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set, read as huggingface_hub
    reads it (its ``_is_true``), but now: a verb's ``--offline`` sets it after that
    library read it at import, and `check` need not import the library to know."""
    now = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return now.strip().upper() in {"1", "ON", "YES", "TRUE"}


# What pip's failure adds when it ran offline: why the index was not asked.
PIP_OFFLINE_HINT = (
    "; offline (--offline): pip did not ask its index (PIP_NO_INDEX), so the files must "
    "be in PIP_FIND_LINKS (a wheelhouse) or already installed"
)


def pip_hint() -> str:
    """:data:`PIP_OFFLINE_HINT` while pip is kept off its index, else nothing."""
    return PIP_OFFLINE_HINT if os.environ.get("PIP_NO_INDEX") == "1" and offline() else ""


# What go_offline() replaced, restored by end_verb() when the verb ends.
_entered: list[dict[str, str | None]] = []


def go_offline() -> None:
    """A verb's ``--offline`` from here to its end: the CLI's ``main`` calls
    :func:`end_verb` then (in-process callers, tests, find the environment as it was)."""
    _entered.append({name: os.environ.get(name) for name in OFFLINE_ENV})
    os.environ.update(OFFLINE_ENV)


def end_verb() -> None:
    """Undo every :func:`go_offline` of the verb that ends."""
    while _entered:
        _restore(_entered.pop())


def _restore(before: dict[str, str | None]) -> None:
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextmanager
def offline_mode(on: bool) -> Iterator[None]:
    """A verb's ``--offline``: :data:`OFFLINE_ENV` for its duration, then as before."""
    if not on:
        yield
        return
    before = {name: os.environ.get(name) for name in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)
    try:
        yield
    finally:
        _restore(before)
