"""A swap group resolved into one llama-server router: its argv and its preset file.

Each member is resolved exactly as it would run alone (:func:`inferfleet.render.launch.resolve`,
so its alias, per-slot window x slots, cache types, template, drafter and
extra flags are the ones the single-model argv carries); its argv becomes its
preset section (:mod:`inferfleet.runtimes.llamacpp_router`). The router
itself is what the group's unit runs.
"""

from __future__ import annotations

from pathlib import Path

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.groups import members, unit_service
from inferfleet.render import facts as paths
from inferfleet.render.facts import HostFacts
from inferfleet.render.launch import Resolved, resolve
from inferfleet.runtimes.llamacpp_router import Member, preset_section, render_presets, router_argv
from inferfleet.runtimes.pinned import entry_args
from inferfleet.runtimes.registry import traits


def preset_install_path(facts: HostFacts, scope: str, group: str) -> str:
    """Where the group's preset file lives on its host (next to the env files)."""
    return f"{facts.config_dir(scope)}/presets/{group}.ini"


def resolve_group(fleet: Fleet, fleet_root: Path, name: str, facts: HostFacts) -> Resolved:
    group = fleet.groups[name]
    unit = unit_service(fleet, name)
    assert unit.runtime is not None
    runtime = fleet.runtimes[unit.runtime]
    if runtime.image is not None:
        raise UsageError(
            f"group {name!r}: runtime {unit.runtime!r} runs in a container image; swap groups "
            "run the router from a llama.cpp build on the host",
            where=f"groups.{name}",
            hint="serve the group's members with a llama.cpp runtime built from source (or "
            "a binary) and backend process or systemd",
        )
    kind = traits(runtime.kind)
    program = [paths.runtime_binary(runtime, facts), *entry_args(runtime.kind, runtime.source)]
    sections: dict[str, dict[str, str]] = {}
    at_start = set(group.at_start)
    sleep = None if group.idle_unload is None else max(1, round(group.idle_unload))
    for member_name, service in members(fleet, name).items():
        alone = resolve(fleet, fleet_root, member_name, facts)
        resident = member_name in group.resident
        member = Member(
            name=member_name,
            words=alone.argv[len(program) :],
            load_on_startup=member_name in at_start,
            sleep_idle_s=None if resident else sleep,
            stop_timeout_s=round(kind.stop_grace_s),
        )
        sections[service.alias or member_name] = preset_section(member)
    preset_path = preset_install_path(facts, unit.unit.scope, name)
    argv = router_argv(program, unit.bind, unit.port, preset_path, group.max_loaded)
    return Resolved(
        name,
        unit,
        unit.host,
        fleet.hosts[unit.host],
        facts,
        runtime,
        kind,
        None,
        argv,
        preset=(preset_path, render_presets(name, sections)),
    )
