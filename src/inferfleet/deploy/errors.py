"""Errors of the deploy layer: git, ssh, the host lock and the deploy gates.

They join the one error tree (:class:`~inferfleet.errors.FleetError`) and
the builtin a caller would catch, like every other inferfleet error.
"""

from __future__ import annotations

from inferfleet.errors import FleetError, LogTailError, UsageError


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


class RemoteError(LogTailError):
    """The apply on a host failed; carries the host's own account of it."""
