"""Errors of ``host bootstrap``: the host's Python, pip there or here, its checkout, linger."""

from __future__ import annotations

from inferfleet.errors import LogTailError


class BootstrapError(LogTailError):
    """A host could not be prepared; ``log_tail`` is the failing tool's last lines."""

    tail_label = "its output"


class HostPythonError(BootstrapError):
    """The host has no Python inferfleet can run on (missing, too old, no venv module)."""


class CheckoutError(BootstrapError):
    """The host's fleet checkout cannot be brought to the revision without losing work."""
