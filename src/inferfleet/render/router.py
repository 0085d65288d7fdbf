"""A swap group resolved into one llama-server router: its argv and its preset file.

Each member is resolved exactly as it would run alone (:func:`inferfleet.render.launch.resolve`,
so its alias, per-slot window x slots, cache types, template, drafter and
extra flags are the ones the single-model argv carries); its argv becomes its
preset section (:mod:`inferfleet.runtimes.llamacpp_router`). The router
itself is what the group's unit runs: on the host, or in the runtime's
container with every member's model folder mounted as it would be alone, the
presets mounted read-only and one cache mount for the group (L-37).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Service
from inferfleet.fleetfile.groups import members, unit_service
from inferfleet.render import facts as paths
from inferfleet.render.facts import HostFacts
from inferfleet.render.launch import (
    CACHE_MOUNT,
    TEMPLATE_MOUNT,
    Mount,
    Resolved,
    container,
    llm_container_env,
    resolve,
)
from inferfleet.runtimes.llamacpp_router import (
    ROUTER_ENV,
    Member,
    preset_section,
    render_presets,
    router_argv,
)
from inferfleet.runtimes.pinned import entry_args
from inferfleet.runtimes.registry import traits

# Where a containerised router reads its presets and each member's chat template.
PRESET_MOUNT = "/etc/inferfleet/presets.ini"
TEMPLATES_MOUNT = "/etc/inferfleet/templates"


def preset_install_path(facts: HostFacts, scope: str, group: str) -> str:
    """Where the group's preset file lives on its host (next to the env files)."""
    return f"{facts.config_dir(scope)}/presets/{group}.ini"


def router_service(fleet: Fleet, name: str) -> Service:
    """The group's unit as a service, with the router's Hub paths closed (ROUTER_ENV):
    last in its runtime environment, and no tunable of the same name above them."""
    unit = unit_service(fleet, name)
    return unit.model_copy(
        update={
            "runtime_env": {**unit.runtime_env, **ROUTER_ENV},
            "env": {k: v for k, v in unit.env.items() if k not in ROUTER_ENV},
        }
    )


def resolve_group(fleet: Fleet, fleet_root: Path, name: str, facts: HostFacts) -> Resolved:
    group = fleet.groups[name]
    unit = router_service(fleet, name)
    assert unit.runtime is not None
    runtime = fleet.runtimes[unit.runtime]
    kind = traits(runtime.kind)
    in_container = runtime.image is not None
    if in_container:
        program = list(kind.container_program)
    else:
        binary = paths.runtime_binary(runtime, facts)
        program = [binary, *entry_args(runtime.kind, runtime.source, binary)]
    sections: dict[str, dict[str, str]] = {}
    mounts: dict[str, Mount] = {}
    at_start = set(group.at_start)
    sleep = None if group.idle_unload is None else max(1, round(group.idle_unload))
    for member_name, service in members(fleet, name).items():
        alone = resolve(fleet, fleet_root, member_name, facts)
        words = alone.argv[len(program) :]
        if in_container:
            words = _member_mounts(name, member_name, alone, words, mounts)
        member = Member(
            name=member_name,
            words=words,
            load_on_startup=member_name in at_start,
            sleep_idle_s=None if member_name in group.resident else sleep,
            stop_timeout_s=round(kind.stop_grace_s),
        )
        sections[service.model_id(member_name)] = preset_section(member)
    preset_path = preset_install_path(facts, unit.unit.scope, name)
    preset = (preset_path, render_presets(name, sections))
    if not in_container:
        argv = router_argv(program, unit.bind, unit.port, preset_path, group.max_loaded)
        return Resolved(
            name, unit, unit.host, fleet.hosts[unit.host], facts, runtime, kind, None, argv,
            preset=preset,
        )  # fmt: skip
    host_network = unit.container.network == "host"
    argv = router_argv(
        program,
        unit.bind if host_network else "0.0.0.0",
        unit.port if host_network else unit.container.port or unit.port,
        PRESET_MOUNT,
        group.max_loaded,
    )
    found = [
        *mounts.values(),
        Mount(preset_path, PRESET_MOUNT, True),
        Mount(paths.container_cache(name, unit, facts), CACHE_MOUNT, False),
    ]
    env = llm_container_env(unit, kind)
    # The members' binds were judged by their exposure as each resolved (L-58); one bind.
    host = fleet.hosts[unit.host]
    resolved = container(name, unit, host, facts, runtime, kind, argv, found, env, unit.bind)
    return replace(resolved, preset=preset)


def _member_mounts(
    group: str, member: str, alone: Resolved, words: list[str], mounts: dict[str, Mount]
) -> list[str]:
    """A member's mounts joined into the router's; its words with its template's new place.

    Alone, every server mounts its chat template at one path; in a router each
    member gets its own, so two members' templates never collide.
    """
    template = f"{TEMPLATES_MOUNT}/{member}.jinja"
    for mount in alone.mounts:
        if mount.container == CACHE_MOUNT:
            continue  # the group has one cache mount
        if mount.container == TEMPLATE_MOUNT:
            mount = Mount(mount.host, template, mount.read_only)
        held = mounts.get(mount.container)
        if held is not None and held != mount:
            raise UsageError(
                f"group {group!r}: member {member!r} mounts {mount.host} at {mount.container}, "
                f"where another member mounts {held.host}",
                where=f"services.{member}.container.volumes",
                hint="give the members' volumes distinct container paths",
            )
        mounts[mount.container] = mount
    return [template if word == TEMPLATE_MOUNT else word for word in words]
