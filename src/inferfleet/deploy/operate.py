"""``stop``, ``start``, ``restart`` and ``logs`` of one service, on the host that runs it.

Every backend (process, systemd, Quadlet) and every host: the CLI runs these
here for a service of this machine, and over ssh on any other host, in that
host's checkout (``inferfleet VERB SERVICE --host NAME``, as deploy runs
``apply``). Each change goes through apply's host lock, the service's lock and
apply's executor:

- ``stop``: the service's facts read, then
  :func:`~inferfleet.deploy.actions.stop_actions` executed (its recorded
  process by pid, L-43; its units through systemctl in their scope, the
  host's ``become`` for the system scope). Its marker goes, as ``down``'s
  does: a marker says what runs (L-41). With a hold (``--hold REASON``) its
  units are also disabled and the hold is recorded beside the markers
  (:mod:`inferfleet.deploy.holds`): apply, deploy and up leave it down.
- ``start``: the hold lifted under the host lock, then ``up``'s path for the
  one service (gates, start, health gate, contract probe, marker). It builds
  nothing: a missing runtime fails its gate with the fix.
- ``restart``: stop, then start; a held service is refused (``start`` lifts
  the hold).
- ``logs``: the process backend's log file, or the unit's journal
  (``journalctl [--user] -u``, through ``become`` for the system scope; a
  Quadlet unit's journal holds its container's output). Bytes that are not
  UTF-8 are shown as replacement characters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from inferfleet import paths
from inferfleet.backends.health import tail
from inferfleet.backends.process import ProcessBackend
from inferfleet.backends.systemd import Systemctl
from inferfleet.deploy import execute, local
from inferfleet.deploy.actions import stop_actions
from inferfleet.deploy.facts import gather, host_facts, system_become
from inferfleet.deploy.holds import Hold, HoldStore, new_hold
from inferfleet.deploy.lock import SERVICE_LOCK_WAIT_S, ServiceLock
from inferfleet.deploy.markers import MarkerStore
from inferfleet.deploy.state import decide
from inferfleet.deploy.worktree import fleet_here
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.groups import unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import process
from inferfleet.io.become import for_scope
from inferfleet.render.facts import unit_name

Note = Callable[[str], None]
JOURNAL_TIMEOUT = 30.0
FOLLOW_POLL_S = 0.2


@dataclass(frozen=True)
class Stopped:
    service: str
    host: str
    outcome: str  # stopped | not-running
    steps: list[str]  # what was done, one line each
    hold: Hold | None = None


def service_host(loaded: LoadedFleet, name: str, here: str | None = None) -> str:
    """The host of ``name`` when it is this machine (``here``: its name, given by the
    deploying side); a usage error otherwise, or for a name that is not a service."""
    local.local_services(loaded, name)  # a known service or group, else a usage error
    host = unit_service(loaded.fleet, name).host
    if here is not None and host != here:
        raise UsageError(
            f"service {name!r} runs on host {host!r}, not on {here!r}",
            hint=f"run it without --host from your checkout, or with --host {host} there",
        )
    if here is None and not loaded.fleet.hosts[host].is_local(host):
        raise UsageError(
            f"service {name!r} runs on host {host!r}, not on this machine",
            hint="run the verb from the fleet repository's checkout: it reaches the host over ssh",
        )
    return host


def stop(
    loaded: LoadedFleet,
    name: str,
    *,
    here: str | None = None,
    hold: str | None = None,
    grace: float = 10.0,
    note: Note = lambda _text: None,
) -> Stopped:
    """Stop the service (every backend) and, with ``hold``, keep it down until ``start``."""
    host = service_host(loaded, name, here)
    placed = None if hold is None else new_hold(name, hold)  # refused before anything stops
    service = unit_service(loaded.fleet, name)
    state_dir = paths.state_dir(loaded.fleet.hosts[host])
    at = fleet_here(loaded)
    steps: list[str] = []

    def emit(event: dict[str, object]) -> None:
        if event.get("event") == "step":
            steps.append(str(event.get("detail", "")))
            note(f"{name}: {event.get('detail', '')}")

    with local.host_lock(loaded, host, state_dir) as lock:
        lock.acquire(f"stop of {name}", wait=SERVICE_LOCK_WAIT_S, on_wait=note)
        with ServiceLock(state_dir, name) as service_lock:
            # Never while an up or apply of this service is starting it.
            service_lock.acquire(f"stop of {name}", wait=SERVICE_LOCK_WAIT_S, on_wait=note)
            facts = host_facts(loaded.root)
            markers = MarkerStore(state_dir)
            state = decide(
                gather(
                    name,
                    facts,
                    state_dir,
                    markers.read(name),
                    endpoint=(service.bind, service.port, service.health.path),
                    become=system_become(loaded.fleet, host),
                )
            )
            ctx = execute.Context(host, at.revision, at, loaded.root, facts, state_dir, emit)
            actions = stop_actions(name, state, disable=placed is not None)
            execute.run_stop(ctx, name, actions, grace=grace)
            markers.remove(name)
            if placed is not None:
                HoldStore(state_dir).write(placed)
            local.forget_memo(loaded)
    stopped = any(a.kind in {"stop", "stop-unit"} for a in actions)
    return Stopped(name, host, "stopped" if stopped else "not-running", steps, placed)


def start(
    loaded: LoadedFleet,
    name: str,
    hooks: local.Hooks,
    *,
    here: str | None = None,
    contract: bool = True,
) -> local.UpResult:
    """Lift the service's hold, if any, and bring it up as ``up`` does (nothing is built)."""
    service_host(loaded, name, here)
    [done] = local.up(
        loaded, [name], hooks, contract=contract, lift=(name,), here=here, build=False
    )
    return done


def restart(
    loaded: LoadedFleet,
    name: str,
    hooks: local.Hooks,
    *,
    here: str | None = None,
    grace: float = 10.0,
    contract: bool = True,
) -> local.UpResult:
    """Stop, then start; a held service stays held (``start`` is the verb that lifts it)."""
    host = service_host(loaded, name, here)
    held = HoldStore(paths.state_dir(loaded.fleet.hosts[host])).read(name)
    if held is not None:
        raise UsageError(
            f"service {name!r} is {held.describe()}",
            hint=f"`inferfleet start {name}` lifts the hold and starts it",
        )
    stop(loaded, name, here=here, grace=grace, note=hooks.note)
    done = start(loaded, name, hooks, here=here, contract=contract)
    return replace(done, action="restarted") if done.action == "started" else done


def logs(
    loaded: LoadedFleet,
    name: str,
    *,
    here: str | None = None,
    lines: int = 50,
    follow: bool = False,
    echo: Callable[[str], None],
) -> None:
    """Print the last ``lines`` of the service's log; with ``follow``, keep printing."""
    if lines < 0:
        raise UsageError(f"-n {lines}: the number of lines is 0 or more")
    host = service_host(loaded, name, here)
    service = unit_service(loaded.fleet, name)
    spec = loaded.fleet.hosts[host]
    if service.backend == "process":
        _process_log(ProcessBackend(paths.state_dir(spec)), name, lines, follow, echo)
        return
    scope = service.unit.scope
    systemctl = Systemctl(scope, for_scope(host, spec.become, scope))
    argv = systemctl.journal_argv(f"{unit_name(name)}.service", lines, *(["-f"] if follow else []))
    if follow:
        process.run(argv, check=False, on_line=echo)
        return
    done = process.run(argv, check=False, timeout=JOURNAL_TIMEOUT)
    if done.returncode != 0:
        raise FleetError(
            f"journalctl for service {name} failed (status {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-400:]}",
            where=f"host {host}",
            hint="the system scope's journal needs root or the host's become: sudo "
            "(a user in the systemd-journal group reads it too)",
        )
    if done.stdout:
        echo(done.stdout.rstrip("\n"))


def _process_log(
    backend: ProcessBackend, name: str, lines: int, follow: bool, echo: Callable[[str], None]
) -> None:
    path = backend.log_path(name)
    if not path.exists():
        raise FleetError(
            f"no log for service {name!r} at {path}",
            hint="the service has not been started on its host (inferfleet start, up or deploy)",
        )
    if lines:
        echo(tail(path, lines))
    if not follow:
        return
    with path.open("rb") as handle:
        handle.seek(0, 2)
        pending = b""
        while True:
            chunk = handle.read()
            if not chunk:
                time.sleep(FOLLOW_POLL_S)
                continue
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                echo(line.decode("utf-8", "replace"))
