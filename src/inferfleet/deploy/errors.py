"""Errors of the deploy layer: git, ssh, the host lock and the deploy gates.

They join the one error tree (:class:`~inferfleet.errors.FleetError`) and
the builtin a caller would catch, like every other inferfleet error.
"""

from __future__ import annotations

from inferfleet.errors import FleetError, UsageError


class GitError(FleetError, OSError):
    """A git command on the fleet repository failed or the repository is not usable."""


class DirtyTreeError(UsageError):
    """A checkout has uncommitted changes: only committed revisions are deployed."""


class SshError(FleetError, OSError):
    """A host could not be reached, or the connection dropped."""


class LockHeldError(FleetError, BlockingIOError):
    """Another deploy holds this host's lock."""


class GateError(FleetError):
    """A deploy gate refused to go on (devices, linger, shards, a held port)."""


class RemoteError(FleetError):
    """The apply on a host failed; carries the host's own account of it."""

    def __init__(
        self, message: str, *, hint: str = "", where: str = "", log_tail: str = ""
    ) -> None:
        super().__init__(message, hint=hint, where=where)
        self.log_tail = log_tail

    def render(self) -> str:
        text = super().render()
        if self.log_tail:
            text += "\nlast lines of the service's log:\n" + self.log_tail
        return text
