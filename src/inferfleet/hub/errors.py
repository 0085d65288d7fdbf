"""Errors of talking to a Hugging Face Hub (or a mirror) and fetching from it.

They are :class:`~inferfleet.errors.FleetError` subclasses, so the CLI prints
``where: message -- hint`` without a traceback. Each says what the fix is:
accept the gate, check the token's scope, regenerate the manifest. None of
them ever carries the token itself.
"""

from __future__ import annotations

from inferfleet.errors import FleetError


class HubError(FleetError, OSError):
    """The Hub (or a mirror, or its CDN) answered something we cannot use."""


class AuthError(HubError, PermissionError):
    """401, a token the Hub refuses, or a token file others can read (L-06, L-07)."""


class GatedRepoError(AuthError):
    """The repo is gated and this account has not accepted its terms (L-07)."""


class HubNotFoundError(HubError, FileNotFoundError):
    """The repo, the revision or a file is not on the Hub (any more, L-09)."""


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
