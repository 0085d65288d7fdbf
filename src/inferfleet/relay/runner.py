"""Running the user's command once per alert, one at a time, off the request path.

The webhook answers as soon as the notification is parsed and queued:
Alertmanager should not wait on a slow chat CLI, and a command that hangs is
killed after its timeout without blocking later alerts. The command is an
argv list run through the one process runner, never a shell string; alert
fields travel in its environment (see ``webhook.environment``).
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from inferfleet.errors import FleetError
from inferfleet.io import process
from inferfleet.relay.webhook import Notification, environment

QUEUE_SIZE = 1000
HISTORY = 200


class QueueFull(FleetError, OSError):
    """More alerts are waiting than the relay keeps; Alertmanager retries later."""


@dataclass(frozen=True)
class Delivery:
    at: float
    alert: str  # the alert's one-line text
    status: str
    fingerprint: str
    returncode: int | None  # None: the command could not run or timed out
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class CommandRunner:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        on_delivery: Callable[[Delivery], None] = lambda _d: None,
    ) -> None:
        if not argv:
            raise ValueError("the relay needs a command to run")
        self.argv = list(argv)
        self.timeout = timeout
        self.on_delivery = on_delivery
        self._queue: queue.Queue[tuple[str, str, str, dict[str, str]] | None] = queue.Queue(
            QUEUE_SIZE
        )
        self._history: collections.deque[Delivery] = collections.deque(maxlen=HISTORY)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="relay-command", daemon=True)
        self._thread.start()

    def submit(self, notification: Notification) -> int:
        """Queue one run per alert; returns how many were queued."""
        # All or none: Alertmanager resends the whole notification after a 503,
        # so queueing part of it would run those alerts twice.
        if self._queue.qsize() + len(notification.alerts) > QUEUE_SIZE:
            raise QueueFull(
                f"{self._queue.qsize()} alerts are already waiting for the command",
                hint="the command is slower than the alerts come in; make it faster or "
                "group alerts in Alertmanager (group_by, group_interval)",
            )
        for alert in notification.alerts:
            env = environment(alert, notification)
            self._queue.put_nowait((alert.text(), alert.status, alert.fingerprint, env))
        return len(notification.alerts)

    def history(self) -> list[Delivery]:
        with self._lock:
            return list(self._history)

    def wait_idle(self, timeout: float) -> bool:
        """True once every queued alert has been handed to the command (or timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.02)
        return False

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(self.timeout + 5)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._deliver(*item)
            finally:
                self._queue.task_done()

    def _deliver(self, text: str, status: str, fingerprint: str, env: dict[str, str]) -> None:
        started = time.monotonic()
        code: int | None = None
        error = ""
        try:
            done = process.run(
                self.argv, env={**os.environ, **env}, timeout=self.timeout, check=False
            )
            code = done.returncode
            if code != 0:
                error = (done.stderr or done.stdout).strip()[-500:]
        except FleetError as exc:
            error = exc.render()
        delivery = Delivery(
            round(time.time(), 3),
            text,
            status,
            fingerprint,
            code,
            round(time.monotonic() - started, 3),
            error,
        )
        with self._lock:
            self._history.append(delivery)
        # A failing log line must not stop the alerts after it.
        with contextlib.suppress(Exception):
            self.on_delivery(delivery)
