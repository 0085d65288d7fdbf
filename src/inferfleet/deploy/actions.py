"""From what should run and what runs now, the actions of one service, as data.

A pure function (pyinfra's operation): ``deploy --dry-run`` prints exactly
these, and ``apply`` executes them in order. The order encodes the lessons:
gates before anything is touched; the old unit stopped and a stale container
of the same name removed before the port must be free (L-35, L-36);
``daemon-reload`` only when a unit file changed; the health gate on the
service's own process (L-33, L-34); the marker last, only once healthy (L-41).

A service that already runs exactly this spec and answers health from its
own process is not restarted: its health is checked and its marker moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inferfleet.deploy.gates import Gate
from inferfleet.deploy.markers import Marker
from inferfleet.deploy.state import ServiceState
from inferfleet.documents import ActionRow
from inferfleet.render.frontdoor import Launch
from inferfleet.render.launch_parts import UNIT_KINDS


@dataclass(frozen=True)
class Action:
    kind: str  # gate | stop | stop-unit | disable | remove-container | wait-port | write-settings |
    #            install | daemon-reload | enable | start | restart | health | verify |
    #            uninstall | marker | forget
    service: str
    detail: str
    target: str = ""  # the gate's check, the unit's scope:name, the file's path

    def to_json(self) -> ActionRow:
        return ActionRow(kind=self.kind, service=self.service, detail=self.detail)


def service_actions(
    desired: Launch, state: ServiceState, gates: list[Gate], revision: str
) -> list[Action]:
    name = desired.name
    health_url = desired.health_url
    actions = [Action("gate", name, g.detail, g.check) for g in gates]
    changed = [f for f in desired.files if state.files.get(f.path) != f.sha256]
    # A settings file rendered on the host (L-54) is an input like the unit files.
    stale = state.stale_settings
    if desired.backend == "process":
        keep = state.process_spec == desired.spec and state.healthy and not stale
    else:
        running = state.unit_running(desired.scope, desired.service_unit)
        keep = not changed and not stale and running and state.healthy
    marker = (
        [Action("marker", name, f"record revision {revision[:12]} for {name}")]
        if desired.marked
        else []
    )
    if keep:
        return [
            *actions,
            Action(
                "verify",
                name,
                f"already runs this spec (pid {state.pid}); check {health_url} answers from it",
            ),
            *marker,
        ]

    actions += _stop_previous(desired, state)
    if desired.image is not None:
        actions.append(
            Action("remove-container", name, f"remove a stale container named {desired.unit}")
        )
    actions.append(Action("wait-port", name, f"wait until {desired.bind}:{desired.port} is free"))
    for dest in stale:
        how = state.settings_status(dest)
        actions.append(
            Action(
                "write-settings", name, f"write {dest} ({how}; from its template, mode 600)", dest
            )
        )
    if desired.backend == "process":
        # Files a process reads (a swap group's presets) are installed before it starts.
        for item in changed:
            actions.append(Action("install", name, f"install {item.path}", item.path))
        # The process backend holds what it starts to the gate itself (and
        # stops it by pid if the gate fails), so start and health are one step.
        actions.append(
            Action(
                "start",
                name,
                f"start {desired.argv[0]} (detached), then wait up to "
                f"{desired.health_timeout:g} s for {health_url} to answer 200 from its process",
            )
        )
    else:
        for item in changed:
            actions.append(Action("install", name, f"install {item.path}", item.path))
        if any(f.kind in UNIT_KINDS for f in changed):
            actions.append(Action("daemon-reload", name, _ctl(desired.scope, "daemon-reload")))
        unit = desired.service_unit
        if desired.backend == "systemd":
            actions.append(Action("enable", name, _ctl(desired.scope, f"enable {unit}")))
        actions.append(Action("restart", name, _ctl(desired.scope, f"restart {unit}")))
        actions.append(
            Action(
                "health",
                name,
                f"wait up to {desired.health_timeout:g} s for {health_url} to answer 200 "
                "from the unit's MainPID",
            )
        )
    actions += marker
    return actions


def _stop_previous(desired: Launch, state: ServiceState) -> list[Action]:
    """Stop whatever of this service runs now: its process, its unit in any scope."""
    # A unit left behind in another backend or scope must not come back at boot.
    return _stop_running(
        desired.name,
        state,
        how="recorded; SIGTERM, then KILL",
        disable=lambda scope: desired.backend == "process" or scope != desired.scope,
    )


def stop_actions(name: str, state: ServiceState, *, disable: bool) -> list[Action]:
    """``inferfleet stop``: whatever of the service runs, stopped; with ``disable`` (a hold)
    its units are disabled too, so a reboot does not bring it back either."""
    return _stop_running(
        name, state, how="recorded; SIGTERM, then KILL", disable=lambda _scope: disable
    )


def retire_actions(marker: Marker, state: ServiceState) -> list[Action]:
    """Undo a service that no longer runs on this host (L-40)."""
    name = marker.service
    found = _stop_running(
        name, state, how="recorded", disable=lambda _scope: marker.backend == "systemd"
    )
    if marker.backend == "quadlet":
        found.append(Action("remove-container", name, f"remove the container {marker.unit}"))
    for path in marker.installed:
        found.append(Action("uninstall", name, f"remove {path}", path))
    for path in marker.settings:  # rendered settings hold secrets: archived, not left (L-54)
        found.append(Action("uninstall", name, f"remove {path} (settings)", path))
    if any(p.endswith((".service", ".container")) for p in marker.installed):  # not env/presets
        found.append(Action("daemon-reload", name, _ctl(marker.scope, "daemon-reload")))
    found.append(Action("forget", name, f"remove the marker of {name}"))
    return found


def _stop_running(
    name: str, state: ServiceState, *, how: str, disable: Callable[[str], bool]
) -> list[Action]:
    """Stop the service's recorded process and its running units; disable a unit of a
    scope for which ``disable(scope)`` holds."""
    found: list[Action] = []
    if state.process_spec is not None and state.pid is not None:
        found.append(Action("stop", name, f"stop pid {state.pid} ({how})"))
    for key, status in sorted(state.units.items()):
        scope, _, unit = key.partition(":")
        if not status.startswith(("inactive", "unknown")):
            found.append(Action("stop-unit", name, _ctl(scope, f"stop {unit}"), key))
        if disable(scope):
            found.append(Action("disable", name, _ctl(scope, f"disable {unit}"), key))
    return found


def _ctl(scope: str, args: str) -> str:
    return f"systemctl {'--user ' if scope == 'user' else ''}{args}"
