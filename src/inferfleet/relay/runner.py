"""Running the user's command once per alert, one at a time, off the request path.

The webhook answers as soon as the notification is parsed and queued:
Alertmanager should not wait on a slow chat CLI, and a command that hangs is
killed after its timeout without blocking later alerts. The command is an
argv list run through the one process runner, never a shell string; alert
fields travel in its environment (see ``webhook.environment``).

The worker never dies of one alert: whatever goes wrong while delivering it
(its environment, the command, its output, the log callback) is recorded
against that alert and the next one runs. If the worker stops anyway,
``alive()`` says so and ``/healthz`` turns red.
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
from inferfleet.relay.webhook import Alert, Notification, environment

QUEUE_SIZE = 1000
HISTORY = 200
MAX_TEXT = 1000  # characters of an alert's text kept in the history and the log
MAX_ERROR = 500  # characters of a failed command's output kept


class QueueFull(FleetError, OSError):
    """More alerts are waiting than the relay keeps (or it is stopping); Alertmanager retries."""


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
        queue_size: int = QUEUE_SIZE,
        on_delivery: Callable[[Delivery], None] = lambda _d: None,
    ) -> None:
        if not argv:
            raise ValueError("the relay needs a command to run")
        self.argv = list(argv)
        self.timeout = timeout
        self.queue_size = queue_size
        self.on_delivery = on_delivery
        self._queue: queue.Queue[tuple[Alert, Notification] | None] = queue.Queue(queue_size)
        self._history: collections.deque[Delivery] = collections.deque(maxlen=HISTORY)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._stopped_by = ""  # why the worker ended, when it did
        self._thread = threading.Thread(target=self._work, name="relay-command", daemon=True)
        self._thread.start()

    def submit(self, notification: Notification) -> int:
        """Queue one run per alert; returns how many were queued."""
        if self._closing.is_set() or not self._thread.is_alive():
            raise QueueFull(
                "the relay is not delivering alerts (it is stopping or its worker ended)",
                hint="restart inferfleet relay; Alertmanager resends the alerts",
            )
        # All or none: Alertmanager resends the whole notification after a 503,
        # so queueing part of it would run those alerts twice.
        with self._lock:
            if self._queue.qsize() + len(notification.alerts) > self.queue_size:
                raise QueueFull(
                    f"{self._queue.qsize()} alerts are already waiting for the command",
                    hint="the command is slower than the alerts come in; make it faster or "
                    "group alerts in Alertmanager (group_by, group_interval)",
                )
            for alert in notification.alerts:
                self._queue.put_nowait((alert, notification))
        return len(notification.alerts)

    def history(self) -> list[Delivery]:
        with self._lock:
            return list(self._history)

    def queued(self) -> int:
        return self._queue.qsize()

    def alive(self) -> bool:
        """True while the worker runs and takes alerts."""
        return self._thread.is_alive() and not self._closing.is_set()

    def why_stopped(self) -> str:
        if self._closing.is_set():
            return "the relay is stopping"
        return self._stopped_by or "the delivery worker is not running"

    def wait_idle(self, timeout: float) -> bool:
        """True once every queued alert has been handed to the command (or timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.02)
        return False

    def close(self, grace: float = 5.0) -> bool:
        """Stop taking alerts and end the worker; returns within ``grace`` seconds.

        Alerts still waiting are dropped (Alertmanager repeats what still
        fires). A command that is running keeps its own timeout; the worker is
        a daemon thread, so a stuck one never holds the process. True when
        the worker ended in time.
        """
        self._closing.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
                self._queue.task_done()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        self._thread.join(grace)
        return not self._thread.is_alive()

    def _work(self) -> None:
        try:
            while not self._closing.is_set():
                item = self._queue.get()
                try:
                    if item is None:
                        return
                    self._deliver(*item)
                finally:
                    self._queue.task_done()
        except BaseException as exc:  # noqa: BLE001 - the thread ends here either way
            # Only something that is not an Exception gets here (SystemExit from a
            # callback): keep why, so /healthz can say it.
            self._stopped_by = f"the delivery worker ended: {type(exc).__name__}: {exc}"

    def _deliver(self, alert: Alert, notification: Notification) -> None:
        started = time.monotonic()
        code: int | None = None
        error = ""
        try:
            env = environment(alert, notification)
            done = process.run(
                self.argv, env={**os.environ, **env}, timeout=self.timeout, check=False
            )
            code = done.returncode
            if code != 0:
                error = (done.stderr or done.stdout).strip()[-MAX_ERROR:]
        except FleetError as exc:
            error = exc.render()
        except Exception as exc:
            # Isolation: a fault in one delivery (E2BIG, a decoding or encoding
            # error) is that alert's failure, never the end of every later one.
            error = f"the command could not be run: {type(exc).__name__}: {exc}"[:MAX_ERROR]
        delivery = Delivery(
            round(time.time(), 3),
            alert.text()[:MAX_TEXT],
            alert.status,
            alert.fingerprint,
            code,
            round(time.monotonic() - started, 3),
            error,
        )
        with self._lock:
            self._history.append(delivery)
        # A failing log line must not stop the alerts after it.
        with contextlib.suppress(Exception):
            self.on_delivery(delivery)
