"""Errors of talking to a Hugging Face Hub (or a mirror) and fetching from it.

They are :class:`~inferfleet.errors.FleetError` subclasses, so the CLI prints
``where: message -- hint`` without a traceback. Each says what the fix is.
What an HTTP status means (a gate, a refused token, a missing file, a busy
server) is decided for every caller by :mod:`inferfleet.io.http_errors`,
with the classes of :mod:`inferfleet.errors` (``AuthError``, ``GatedError``,
``RemoteNotFoundError``, ``TransientError``); these are what is left: a
download's own failures. None of them ever carries the token itself.
"""

from __future__ import annotations

from inferfleet.errors import FleetError


class HubError(FleetError, OSError):
    """The Hub (or a mirror, or its CDN) answered something we cannot use."""


class FetchError(HubError):
    """A download failed for good: retries spent, or the bytes were wrong (L-01)."""


class IntegrityError(FetchError):
    """Downloaded bytes do not have the declared size or hash; nothing was kept."""


class NoSpaceError(FetchError):
    """The target file system has not enough free space for what is left to fetch."""


class FetchFailures(FetchError):
    """Several files failed; the others were fetched and verified."""

    def __init__(self, failures: list[tuple[str, FleetError]], *, fetched: int) -> None:
        names = ", ".join(path for path, _ in failures)
        super().__init__(
            f"{len(failures)} file(s) not fetched ({names}); {fetched} other file(s) are verified",
            hint="fix what each file's line says, then run the same command again: verified "
            "files are not fetched twice and partial ones resume",
        )
        self.failures = failures
        self.fetched = fetched

    def render(self) -> str:
        lines = [super().render()]
        lines += [f"  {path}: {error.render()}" for path, error in self.failures]
        return "\n".join(lines)
