"""The one error tree of inferfleet.

Every expected failure is a :class:`FleetError`: it carries a one-line
message, where it happened (a file and line, a service, a URL) and a ``hint``
saying how to fix it. The CLI prints ``where: message -- hint`` and exits
with the error's ``exit_code``; only unexpected exceptions show a traceback,
and only with ``INFERFLEET_DEBUG=1``.

Errors also subclass the builtin a caller would naturally catch
(``ValueError`` for bad input, ``OSError`` for I/O), as huggingface_hub does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict, Unpack

# Exit codes scripts can rely on (documented in the README).
EXIT_OK = 0
EXIT_FAILED = 1  # an operation failed (gate, health, process)
EXIT_USAGE = 2  # bad input: fleet file, arguments
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's own code for it
# A deploy reached a healthy server that fails its contract probe: it runs, and
# its marker says "contract: failing" until a later apply passes.
EXIT_CONTRACT = 3


class FleetError(Exception):
    """Root of every expected inferfleet error."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, hint: str = "", where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where

    def render(self) -> str:
        """One paragraph: ``where: message -- hint``."""
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" -- {self.hint}"
        return text

    def __str__(self) -> str:
        return self.render()


class SpecError(FleetError, ValueError):
    """The fleet file is not valid (syntax, schema or cross-reference)."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str = "",
    ) -> None:
        where = ""
        if path is not None:
            where = str(path)
            if line is not None:
                where += f":{line}"
                if column is not None:
                    where += f":{column}"
        super().__init__(message, hint=hint, where=where)
        self.path = None if path is None else Path(path)
        self.line = line
        self.column = column


class SpecErrors(SpecError):
    """Several problems in one fleet file, reported together."""

    def __init__(self, errors: list[SpecError]) -> None:
        first = errors[0]
        super().__init__(
            first.message, path=first.path, line=first.line, column=first.column, hint=first.hint
        )
        self.errors = errors

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


class UsageError(FleetError, ValueError):
    """A command was called with arguments that cannot work."""

    exit_code = EXIT_USAGE


class ProcessError(FleetError, OSError):
    """A subprocess could not be started or failed."""


class ArtifactError(FleetError, OSError):
    """A model file is missing, has the wrong size or the wrong sha256."""


class RuntimeInstallError(FleetError, OSError):
    """A runtime could not be built, installed or found."""


class BackendError(FleetError, OSError):
    """A backend could not start, stop or inspect a service."""


class PortInUseError(BackendError):
    """Another process holds the port a service needs (L-35)."""


class LogTailError(FleetError):
    """A failure best explained by the last lines of a service's log (or a tool's output)."""

    tail_label = "the service's log"

    def __init__(
        self, message: str, *, hint: str = "", where: str = "", log_tail: str = ""
    ) -> None:
        super().__init__(message, hint=hint, where=where)
        self.log_tail = log_tail

    def render(self) -> str:
        text = super().render()
        if self.log_tail:
            text += f"\nlast lines of {self.tail_label}:\n" + self.log_tail
        return text


class HealthError(LogTailError):
    """A service did not become healthy (L-33, L-34)."""


class ContractError(FleetError):
    """A healthy endpoint does not honour the contract the fleet file promises."""


class ContractFailingError(ContractError):
    """A deploy ended with a service deployed but failing its contract probe.

    The server stays running (it is healthy); its marker records the revision
    with ``contract: failing`` and the evidence. Its own exit code, so scripts
    tell it from a failed deploy (nothing new runs) and from success.
    """

    exit_code = EXIT_CONTRACT


class HTTPDetails(TypedDict, total=False):
    """The keywords :class:`HTTPError` takes besides its message (its subclasses take them too)."""

    hint: str
    where: str
    status: int | None
    url: str


class HTTPError(FleetError, OSError):
    """An HTTP request failed or answered with an unexpected status.

    :func:`inferfleet.io.http_errors.status_error` is the one place that turns
    a status into one of these; ``status`` is None for a failure below HTTP
    (refused, reset, timed out).
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str = "",
        where: str = "",
        status: int | None = None,
        url: str = "",
    ) -> None:
        super().__init__(message, hint=hint, where=where)
        self.status = status
        self.url = url


class OfflineError(HTTPError):
    """A request to the network refused before it was sent: offline (--offline or
    HF_HUB_OFFLINE=1, :mod:`inferfleet.io.offline`). Final: never retried."""


class TransientError(HTTPError):
    """Worth retrying: 408, 429, 5xx, a dropped or refused connection, a stall.

    :mod:`inferfleet.io.retry` retries it; when the tries are spent the caller
    reports it like any other error.
    """

    def __init__(
        self, message: str, *, retry_after: float | None = None, **details: Unpack[HTTPDetails]
    ) -> None:
        super().__init__(message, **details)
        self.retry_after = retry_after


class AuthError(HTTPError, PermissionError):
    """A credential is refused (401, 403) or unusable (a token file others can read).

    Final: the same token gets the same answer on the next try (L-06, L-07).
    """


class GatedError(AuthError):
    """The repo is gated and this account has not accepted its terms (L-07)."""


class RemoteNotFoundError(HTTPError, FileNotFoundError):
    """The server has no such repo, revision or file (any more, L-09)."""
