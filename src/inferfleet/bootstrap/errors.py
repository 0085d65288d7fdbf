"""Errors of ``host bootstrap``: the host's Python, pip there or here, its checkout, linger."""

from __future__ import annotations

from inferfleet.errors import FleetError


class BootstrapError(FleetError):
    """A host could not be prepared; ``output`` is the failing tool's last lines."""

    def __init__(self, message: str, *, hint: str = "", where: str = "", output: str = "") -> None:
        super().__init__(message, hint=hint, where=where)
        self.output = output

    def render(self) -> str:
        text = super().render()
        if self.output:
            text += "\nlast lines of its output:\n" + self.output
        return text


class HostPythonError(BootstrapError):
    """The host has no Python inferfleet can run on (missing, too old, no venv module)."""


class CheckoutError(BootstrapError):
    """The host's fleet checkout cannot be brought to the revision without losing work."""
