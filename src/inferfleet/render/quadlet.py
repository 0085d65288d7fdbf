"""Podman Quadlet ``.container`` files for ``backend: quadlet`` services.

Defaults that encode lessons:

- L-42: the image is used as written, which ``check`` requires to be pinned
  by digest; ``Pull=missing`` never re-resolves it.
- L-37: a persistent cache mount at ``/cache``, created before start, with
  the runtime's compile and download caches pointed into it.
- L-39: ``HOME`` on that writable mount.
- L-38: ``Notify=healthy`` with a health command and a start period sized to
  the model load, ``Restart=always``, ``WantedBy=``; the start timeout covers
  the load (L-34). A startup check (same command, every 2 s until it first
  passes) makes systemd see the unit started right after the load.
- L-36: ``ContainerName=`` is fixed and Quadlet runs ``podman run --replace
  --rm``, so a container left by a killed restart never blocks the name.
"""

from __future__ import annotations

from inferfleet.render.launch import CONTAINER_LABEL, Resolved
from inferfleet.render.systemd import (
    podman_size,
    restart_policy,
    start_timeout,
    stop_timeout,
    unit_head,
    wanted_by,
)
from inferfleet.render.unitfile import UnitFile, command_line, escape_value

HEALTH_INTERVAL = "30s"
HEALTH_RETRIES = 3
HEALTH_TIMEOUT = "10s"
# Until the first pass, the check runs this often: Notify=healthy then reports the unit
# started seconds after the model loads, not up to a whole HealthInterval later.
HEALTH_STARTUP_INTERVAL = "2s"


def health_command(resolved: Resolved) -> str | None:
    opts = resolved.service.container
    if opts.health_cmd is not None:
        return escape_value(opts.health_cmd)  # Quadlet copies it into ExecStart: % is a specifier
    if resolved.traits is None:
        return None  # an ordinary container: only what the fleet says
    port = resolved.container_port or resolved.service.port
    host = "127.0.0.1"
    path = resolved.service.health.path
    return command_line(["curl", "-fsS", "-o", "/dev/null", f"http://{host}:{port}{path}"])


def container_unit(resolved: Resolved) -> UnitFile:
    service = resolved.service
    assert resolved.image is not None
    unit = UnitFile()
    unit_head(unit, resolved, network=False)
    c = "Container"
    unit.add(c, "ContainerName", resolved.unit)
    unit.add(c, "Image", resolved.image)
    # Whose container it is: the health gate finds the server through it (L-33).
    unit.add(c, "Label", f"{CONTAINER_LABEL}={resolved.name}")
    unit.add(c, "Pull", "missing")
    if resolved.traits is not None and resolved.argv:
        unit.add(c, "Entrypoint", resolved.argv[0])
        if resolved.argv[1:]:
            unit.add(c, "Exec", command_line(resolved.argv[1:]))
    elif resolved.argv:
        unit.add(c, "Exec", command_line(resolved.argv))
    if resolved.publish is None:
        unit.add(c, "Network", "host")
    else:
        unit.add(c, "PublishPort", resolved.publish)
    unit.extend(c, "AddDevice", resolved.devices)
    if resolved.devices and resolved.traits is not None:
        # Rootless podman: keep the user's video/render groups so /dev/kfd and /dev/dri open.
        unit.add(c, "GroupAdd", "keep-groups")
    relabel = resolved.host.selinux
    unit.extend(c, "Volume", [escape_value(m.spec(relabel)) for m in resolved.mounts])
    for key, value in resolved.container_env.items():
        unit.add(c, "Environment", command_line([f"{key}={value}"]))
    unit.add(c, "EnvironmentFile", escape_value(resolved.env_file))
    if service.secrets_env is not None:
        unit.add(c, "EnvironmentFile", escape_value(resolved.facts.expand(service.secrets_env)))
    if service.container.user is not None:
        unit.add(c, "User", escape_value(service.container.user))
    if service.container.shm_size is not None:
        unit.add(c, "ShmSize", podman_size(service.container.shm_size))
    if resolved.traits is not None and (resolved.devices or "--mlock" in resolved.argv):
        # GPU runtimes pin host memory for transfers; --mlock locks the weights. Raising
        # the limit needs CAP_SYS_RESOURCE, so a CPU service without --mlock does not ask.
        unit.add(c, "Ulimit", "memlock=-1:-1")
    health = health_command(resolved)
    if health is not None:
        unit.add(c, "HealthCmd", health)
        unit.add(c, "HealthInterval", HEALTH_INTERVAL)
        unit.add(c, "HealthRetries", HEALTH_RETRIES)
        unit.add(c, "HealthTimeout", HEALTH_TIMEOUT)
        # The model load may take the whole health timeout (L-34): failures before
        # that do not count.
        unit.add(c, "HealthStartPeriod", f"{service.health.timeout:g}s")
        unit.add(c, "HealthOnFailure", "kill")
        unit.add(c, "HealthStartupCmd", health)
        unit.add(c, "HealthStartupInterval", HEALTH_STARTUP_INTERVAL)
        unit.add(c, "Notify", "healthy")
    unit.add(c, "StopTimeout", f"{resolved.stop_grace_s:g}")
    for mount in resolved.mounts:
        if not mount.read_only:
            unit.add(
                "Service", "ExecStartPre", command_line([resolved.facts.mkdir, "-p", mount.host])
            )
    restart_policy(unit, resolved)
    unit.add("Service", "TimeoutStartSec", f"{start_timeout(resolved):g}s")
    unit.add("Service", "TimeoutStopSec", f"{stop_timeout(resolved):g}s")
    unit.add("Install", "WantedBy", wanted_by(resolved))
    return unit
