"""The one retry policy: bounded exponential backoff over transient failures.

A failure is worth retrying when the same request may well succeed a little
later: 408, 429 and 5xx answers, a reset or refused connection, a stalled
body. Everything else (401, 403, a gate, 404, wrong bytes) is final and is
never retried (L-07). :func:`~inferfleet.io.http_errors.status_error` decides
which is which; this module decides how often and how long to wait.

The count is of failures *in a row without progress*: a download that gets
new bytes before each failure starts a new count (see :class:`Attempts`), so
a long file over a flaky link still completes while a dead endpoint gives up
after a bounded number of tries.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from inferfleet.errors import TransientError

T = TypeVar("T")


@dataclass(frozen=True)
class Retry:
    """Bounded backoff: ``attempts`` tries in a row that bring no progress.

    The wait doubles from ``base`` up to ``cap``; a server's ``Retry-After``
    replaces it (capped too). huggingface_hub's ``http_backoff`` follows the
    same shape (1 s doubling to 8 s, five retries); it is not used itself
    because it drives its own httpx2 session, not our clients (see io/http.py).
    """

    attempts: int = 8
    base: float = 0.5
    cap: float = 30.0

    def delay(self, number: int, retry_after: float | None) -> float:
        """Seconds to wait after failure ``number`` (1 for the first), in ``[0, cap]``.

        A ``Retry-After`` is clamped to that range too (NaN counts as not
        given), whoever built it: a bad header can never crash the sleep or
        make it unbounded.
        """
        if retry_after is not None and not math.isnan(retry_after):
            return min(max(retry_after, 0.0), self.cap)
        return min(self.base * 2.0 ** min(number - 1, 64), self.cap)


class GaveUp(Exception):
    """Raised by :meth:`Attempts.failed` when the tries are spent; ``last`` says why."""

    def __init__(self, failures: int, last: TransientError) -> None:
        super().__init__(f"gave up after {failures} attempts in a row; last error: {last}")
        self.failures = failures
        self.last = last


class Attempts:
    """The running count of one retried operation."""

    def __init__(self, policy: Retry) -> None:
        self.policy = policy
        self.failures = 0

    def progressed(self) -> None:
        """Something new arrived: the next failure starts a new count."""
        self.failures = 0

    def failed(self, reason: TransientError) -> float:
        """Count a failure; the seconds to wait before the next try, or :class:`GaveUp`."""
        self.failures += 1
        if self.failures >= self.policy.attempts:
            raise GaveUp(self.failures, reason)
        return self.policy.delay(self.failures, reason.retry_after)


def retrying(
    call: Callable[[], T],
    *,
    policy: Retry,
    on_retry: Callable[[TransientError, float], None] = lambda _reason, _delay: None,
    wait: Callable[[float], bool] | None = None,
) -> T:
    """``call()`` until it returns, raises a final error, or the tries are spent (GaveUp).

    ``wait(seconds)`` sleeps and returns True when the operation was cancelled
    meanwhile; the last :class:`TransientError` is then raised as is.
    """
    attempts = Attempts(policy)
    wait = wait or _sleep
    while True:
        try:
            return call()
        except TransientError as reason:
            delay = attempts.failed(reason)
            on_retry(reason, delay)
            if wait(delay):
                raise


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False  # never cancelled
