"""The ``systemd`` backend: units installed, reloaded, enabled and restarted with systemctl.

System units go to ``/etc/systemd/system``, user units to
``~/.config/systemd/user`` and need linger so they start at boot without a
login (L-38); the unit text is the renderer's. ``daemon-reload`` runs only
when a unit file really changed. The health gate follows the unit's own
``MainPID`` (L-33): a crash-looping unit has none that lasts, and a stale
process holding the port is not it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from inferfleet.backends import health as gate
from inferfleet.errors import BackendError, HealthError
from inferfleet.io import process
from inferfleet.io.archive import Keeper
from inferfleet.io.become import NO_BECOME, Become

LINGER_DIR = Path("/var/lib/systemd/linger")
JOB_BEGIN_WAIT = 30.0  # a queued restart job begins (the old server stopped) within this
# `systemctl show` properties the gate and the facts read.
STATE_PROPS = (
    "LoadState",
    "ActiveState",
    "SubState",
    "MainPID",
    "NRestarts",
    "Result",
    "UnitFileState",
)


@dataclass(frozen=True)
class UnitState:
    unit: str
    loaded: str  # loaded | not-found | ...
    active: str  # active | activating | deactivating | inactive | failed | (unknown)
    sub: str
    main_pid: int
    restarts: int
    result: str
    enabled: str

    @property
    def running(self) -> bool:
        return self.active == "active" and self.sub == "running" and self.main_pid > 0


def parse_show(unit: str, text: str) -> UnitState:
    """``systemctl show -p ...`` output (``Key=value`` lines) as a UnitState."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def number(key: str) -> int:
        try:
            return int(values.get(key, "0") or 0)
        except ValueError:
            return 0

    return UnitState(
        unit=unit,
        loaded=values.get("LoadState", "unknown"),
        active=values.get("ActiveState", "unknown"),
        sub=values.get("SubState", ""),
        main_pid=number("MainPID"),
        restarts=number("NRestarts"),
        result=values.get("Result", ""),
        enabled=values.get("UnitFileState", ""),
    )


def linger_enabled(user: str) -> bool:
    """Whether ``loginctl enable-linger`` is set for ``user`` (read without D-Bus)."""
    return (LINGER_DIR / user).exists()


class Systemctl:
    """systemctl and journalctl for one scope (``system`` or ``user``).

    The system scope goes through the host's ``become`` (sudo when its user
    is not root); the user scope never does.
    """

    def __init__(self, scope: str, become: Become = NO_BECOME) -> None:
        self.scope = scope
        self._flag = ["--user"] if scope == "user" else []
        self.become = become
        self._privileged = scope == "system"

    def _run(self, *args: str, check: bool = True, timeout: float = 120.0) -> process.Completed:
        argv = ["systemctl", *self._flag, *args]
        done = self.become.run(argv, privileged=self._privileged, timeout=timeout)
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()
            raise BackendError(
                f"systemctl {' '.join([*self._flag, *args])} failed: {detail[-400:]}",
                hint="run it by hand on the host; `journalctl -xe` has the details",
            )
        return done

    def show(self, unit: str) -> UnitState:
        done = self._run("show", unit, "-p", ",".join(STATE_PROPS), check=False, timeout=30)
        return parse_show(unit, done.stdout)

    def stop(self, unit: str) -> None:
        self._run("stop", unit)

    def restart(self, unit: str, *, block: bool = True) -> None:
        """Restart ``unit``. ``block=False`` for a unit that is started only once healthy
        (Quadlet's ``Notify=healthy``): a blocking restart would last the whole model load,
        past any command timeout, with no progress shown; the job is queued (``--no-block``)
        and this returns once it has begun, so the health gate reads the new start (L-34)."""
        if block:
            self._run("restart", unit)
            return
        self._run("restart", "--no-block", unit)
        deadline = time.monotonic() + JOB_BEGIN_WAIT
        while time.monotonic() < deadline:
            shown = self._run("show", unit, "-p", "Job,ActiveState", check=False, timeout=30)
            values = dict(ln.split("=", 1) for ln in shown.stdout.splitlines() if "=" in ln)
            if values.get("ActiveState") == "activating" or not values.get("Job"):
                return
            time.sleep(0.05)

    def enable(self, unit: str) -> None:
        self._run("enable", "--quiet", unit)

    def disable(self, unit: str) -> None:
        self._run("disable", "--quiet", unit, check=False)

    def daemon_reload(self) -> None:
        self._run("daemon-reload")

    def reset_failed(self, unit: str) -> None:
        self._run("reset-failed", unit, check=False)

    def journal_tail(self, unit: str, lines: int = 20) -> str:
        argv = self._journal(unit, lines, "-o", "cat")
        done = self.become.run(argv, privileged=self._privileged, timeout=30)
        return done.stdout.strip()

    def journal_argv(self, unit: str, lines: int, *extra: str) -> list[str]:
        """``journalctl`` of the unit as run (through ``become`` for the system scope):
        its last ``lines``; ``extra``: more options (``-f`` follows)."""
        return self.become.argv(self._journal(unit, lines, *extra), privileged=self._privileged)

    def _journal(self, unit: str, lines: int, *extra: str) -> list[str]:
        """The journalctl argv of the unit's last ``lines``.

        A user unit is matched with ``--user-unit`` over every journal file this user
        may read: its lines are in the system journal when journald does not split
        per user (a volatile journal, or a system user such as root), where
        ``journalctl --user`` finds none.
        """
        match = ["--user-unit", unit] if self.scope == "user" else ["-u", unit]
        # --all: a line that is not UTF-8 is shown (we decode it with replacement
        # characters), not hidden as "[N blob data]".
        return ["journalctl", *match, "-n", str(lines), "--no-pager", "--all", *extra]


def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def install_file(path: Path, content: str, *, keeper: Keeper, mode: int = 0o644) -> bool:
    """Write ``content`` atomically; returns False (and writes nothing) when it is already there.

    Other bytes found there are archived first (``keeper``): a deploy replaces
    a unit, Quadlet or env file, it never destroys one.
    """
    return keeper.replace(path, content, mode=mode)


def uninstall_file(path: Path, *, keeper: Keeper) -> None:
    """Remove an installed unit, Quadlet or env file of a retired service, archived first."""
    keeper.remove(path)


def wait_unit_healthy(
    systemctl: Systemctl,
    unit: str,
    *,
    service: str,
    bind: str,
    port: int,
    path: str,
    timeout: float,
    on_state: gate.StateFn | None = None,
    owners: Callable[[], set[int]] | None = None,
    tls: gate.TlsTarget | None = None,
) -> gate.HealthResult:
    """The health gate for a unit: 200 on the health path from the unit's MainPID (L-33, L-34)
    or, for a container, from its processes (``owners``: a unit's ``podman run`` is not the
    server's parent, conmon is).

    The shared gate follows the main process; if that process goes away (a
    crash, a restart of a crash loop) the gate fails at once and we report
    the unit's state and journal instead of a generic exit.
    """
    started = time.monotonic()
    deadline = started + 30.0
    state = systemctl.show(unit)
    # Type=exec returns once the binary runs; a unit that already died has no MainPID.
    while state.main_pid <= 0 and state.active == "activating" and time.monotonic() < deadline:
        time.sleep(0.05)
        state = systemctl.show(unit)
    if state.main_pid <= 0:
        raise _unit_failed(systemctl, unit, service, state)
    # A system unit's container is root's: its socket is named through sudo (L-33).
    become = systemctl.become if systemctl.scope == "system" else NO_BECOME
    while True:
        try:
            proc = psutil.Process(state.main_pid)
        except psutil.NoSuchProcess:
            raise _unit_failed(systemctl, unit, service, systemctl.show(unit)) from None
        remaining = max(1.0, timeout - (time.monotonic() - started))
        try:
            result = gate.wait_healthy(
                proc,
                service=service,
                bind=bind,
                port=port,
                path=path,
                timeout=remaining,
                log_path=None,
                on_state=on_state,
                owners=owners,
                become=become,
                tls=tls,
            )
        except HealthError as exc:
            now = systemctl.show(unit)
            if handed_over(state, now, containers=owners is not None):
                state = now  # podman run gave the unit's MainPID to conmon: follow it
                continue
            if now.main_pid != state.main_pid or not now.running:
                raise _unit_failed(systemctl, unit, service, now) from None
            raise HealthError(
                exc.message, where=exc.where, hint=exc.hint, log_tail=systemctl.journal_tail(unit)
            ) from None
        if owners is not None:
            _wait_started(systemctl, unit, service, started + timeout)
        return result


def _wait_started(systemctl: Systemctl, unit: str, service: str, deadline: float) -> None:
    """A container unit is started once podman's own check passed (Quadlet's
    ``Notify=healthy``, seconds after the server answers): wait for systemd to say so, so
    a deployed unit is ``active`` when the deploy returns."""
    state = systemctl.show(unit)
    while state.active == "activating" and time.monotonic() < deadline:
        time.sleep(0.1)
        state = systemctl.show(unit)
    if state.active == "activating":
        raise HealthError(
            f"the server answers, but unit {unit} is still starting: the container's own "
            "health check (podman's, the unit's HealthCmd) has not passed",
            where=f"service {service}",
            hint="a health command the image lacks (curl, wget) never passes: set "
            "container.health_cmd to one it has; `podman inspect --format "
            f"'{{{{json .State.Health}}}}' {unit.removesuffix('.service')}` on the host shows "
            "what the check answered",
            log_tail=systemctl.journal_tail(unit),
        )
    if not state.running:
        raise _unit_failed(systemctl, unit, service, state)


def handed_over(before: UnitState, now: UnitState, *, containers: bool) -> bool:
    """Whether a container unit's main process changed without a restart: Quadlet's
    ``podman run --sdnotify`` is MainPID until it names conmon (``MAINPID=``) and exits."""
    return (
        containers
        and now.main_pid > 0
        and now.main_pid != before.main_pid
        and now.restarts == before.restarts
        and now.active in {"activating", "active"}
    )


def _unit_failed(systemctl: Systemctl, unit: str, service: str, state: UnitState) -> HealthError:
    loop = f", restarted {state.restarts} time(s) (a crash loop)" if state.restarts else ""
    return HealthError(
        f"unit {unit} is {state.active}/{state.sub or '-'} (result {state.result or '-'})"
        f"{loop} before it became healthy",
        where=f"service {service}",
        hint="read the journal lines below; fix the service and deploy again",
        log_tail=systemctl.journal_tail(unit),
    )
