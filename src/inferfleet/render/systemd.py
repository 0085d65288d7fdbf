"""systemd units for ``backend: systemd`` services (system or user scope).

Defaults that encode lessons:

- L-38: ``Restart=always`` by default and ``StartLimitIntervalSec=0`` so a
  unit never gives up after a few fast failures (a model that needs a
  reboot of the driver comes back by itself); user units need linger.
- ``TimeoutStopSec`` stays above the engine's own stop grace, so systemd
  never SIGKILLs a server that is still flushing.
- ``LimitMEMLOCK=infinity`` so ``--mlock``/pinned host buffers do not fail.
- L-36: a container started from a plain unit clears a stale container of
  its own name before ``podman run``; ``--replace`` covers a race.
- L-06: secrets come from an ``EnvironmentFile`` outside the repo, never
  from the command line.
"""

from __future__ import annotations

from inferfleet.render.launch import CONTAINER_LABEL, Resolved
from inferfleet.render.service_keys import requires_key
from inferfleet.render.unitfile import UnitFile, command_line, escape_value

LIMIT_NOFILE = 65536
STOP_MARGIN_S = 15.0  # what systemd waits beyond the engine's grace before SIGKILL


def podman_size(n: int) -> str:
    """Bytes in podman's size syntax, in the largest whole unit (16GiB -> 16g)."""
    for suffix, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if n % factor == 0:
            return f"{n // factor}{suffix}"
    return f"{n}b"


def description(resolved: Resolved) -> str:
    service = resolved.service
    what = (
        f"{resolved.traits.kind} serving {service.model_id(resolved.name)}"
        if resolved.traits is not None
        else f"container {str(resolved.image).split('@', 1)[0]}"
    )
    return escape_value(f"inferfleet {resolved.name}: {what} on {service.bind}:{service.port}")


def wanted_by(resolved: Resolved) -> str:
    return "multi-user.target" if resolved.service.unit.scope == "system" else "default.target"


def unit_head(unit: UnitFile, resolved: Resolved, *, network: bool = True) -> None:
    unit.add("Unit", "Description", description(resolved))
    if network:  # Quadlet adds these itself
        unit.add("Unit", "After", "network-online.target")
        unit.add("Unit", "Wants", "network-online.target")
    # Never give up restarting after a burst of fast failures (L-38).
    unit.add("Unit", "StartLimitIntervalSec", 0)


def restart_policy(unit: UnitFile, resolved: Resolved) -> None:
    opts = resolved.service.unit
    unit.add("Service", "Restart", opts.restart)
    unit.add("Service", "RestartSec", f"{opts.restart_sec:g}s")


def stop_timeout(resolved: Resolved) -> float:
    """TimeoutStopSec: the fleet's value, never below the engine's grace plus a margin."""
    return max(resolved.service.unit.stop_timeout, resolved.stop_grace_s + STOP_MARGIN_S)


def start_timeout(resolved: Resolved) -> float:
    """A load may take the whole health timeout (L-34); systemd must not kill it first."""
    return resolved.service.health.timeout + 60.0


def service_unit(resolved: Resolved) -> UnitFile:
    """A ``.service`` unit running the server directly, or its container with podman."""
    service = resolved.service
    unit = UnitFile()
    unit_head(unit, resolved)
    unit.add("Service", "Type", "exec")
    if service.unit.scope == "system":
        unit.add("Service", "User", escape_value(service.unit.user or resolved.facts.user))
    unit.add("Service", "EnvironmentFile", escape_value(resolved.env_file))
    if service.secrets_env is not None:
        # Optional ("-"): a host without secrets still starts; the file is mode 600 (L-06).
        # A server beyond loopback reads its API key there: without the file it does not
        # start at all, rather than answer anyone (L-58).
        secrets = resolved.facts.expand(service.secrets_env)
        optional = "" if requires_key(service) else "-"
        unit.add("Service", "EnvironmentFile", optional + escape_value(secrets))
    if resolved.in_container:
        _podman_exec(unit, resolved)
    else:
        unit.add("Service", "ExecStart", command_line(resolved.argv))
    restart_policy(unit, resolved)
    unit.add("Service", "TimeoutStartSec", f"{start_timeout(resolved):g}s")
    unit.add("Service", "TimeoutStopSec", f"{stop_timeout(resolved):g}s")
    unit.add("Service", "LimitMEMLOCK", "infinity")
    unit.add("Service", "LimitNOFILE", LIMIT_NOFILE)
    unit.add("Install", "WantedBy", wanted_by(resolved))
    return unit


def _podman_exec(unit: UnitFile, resolved: Resolved) -> None:
    podman = resolved.facts.podman
    name = resolved.unit
    assert resolved.image is not None
    # L-36: a restart kills the container before --rm runs; clear the name first.
    unit.add("Service", "ExecStartPre", "-" + command_line([podman, "rm", "-f", "--ignore", name]))
    for mount in resolved.mounts:
        if not mount.read_only:
            unit.add(
                "Service", "ExecStartPre", command_line([resolved.facts.mkdir, "-p", mount.host])
            )
    run = podman_run(resolved, env_file=resolved.env_file)
    unit.add("Service", "ExecStart", command_line(run))
    grace = f"{resolved.stop_grace_s:g}"
    unit.add("Service", "ExecStop", command_line([podman, "stop", "-t", grace, name]))


def podman_run(
    resolved: Resolved,
    *,
    env_file: str | None = None,
    env_names: list[str] | None = None,
    process: bool = False,
) -> list[str]:
    """``podman run`` of the service's container, in the foreground.

    Every one carries the service's label. A unit's container (``env_file``)
    replaces a leftover of its name and pulls a missing image; a process-backend
    container (``process``) does neither: its stale container is removed by
    name and label before the start (L-36), and the image gate has found the
    pinned image (L-42). Its
    tunables and secrets (``env_names``) pass by name from podman's own
    environment, so no value is on a command line (L-06).
    """
    assert resolved.image is not None
    run = [resolved.facts.podman, "run", "--rm"]
    if not process:
        run += ["--replace", "--name", resolved.unit, "--pull=missing"]
    else:
        run += ["--name", resolved.unit, "--pull=never"]
    # Whose container it is: the health gate finds the server through it (L-33).
    run += ["--label", f"{CONTAINER_LABEL}={resolved.name}"]
    if env_file is not None:
        run += ["--env-file", env_file]
    for key, value in resolved.container_env.items():
        run += ["--env", f"{key}={value}"]
    for key in env_names or []:
        run += ["--env", key]
    for mount in resolved.mounts:
        run += ["--volume", mount.spec(relabel=resolved.host.selinux)]
    for device in resolved.devices:
        run += ["--device", device]
    if process and resolved.devices and resolved.traits is not None:
        # As the Quadlet unit: rootless podman keeps the video/render groups of the user.
        run += ["--group-add", "keep-groups"]
    if resolved.publish is None:
        run += ["--network", "host"]
    else:
        run += ["--publish", resolved.publish]
    if resolved.service.container.shm_size is not None:
        run += ["--shm-size", podman_size(resolved.service.container.shm_size)]
    if resolved.service.container.user is not None:
        run += ["--user", resolved.service.container.user]
    if resolved.traits is not None and resolved.argv:
        run += ["--entrypoint", resolved.argv[0], resolved.image, *resolved.argv[1:]]
    else:
        run += [resolved.image, *resolved.argv]
    return run
