"""Deploy rules: units, containers, pinning, monitoring (L-38, L-39, L-42, L-56, L-57)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from posixpath import normpath

from inferfleet.checks.engine import CheckContext, Hit, rule
from inferfleet.fleetfile.fleet import Service
from inferfleet.render.launch import CACHE_MOUNT

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_URL = re.compile(r"https?://(\[[^\]]+\]|[^/:\s]+):(\d+)")
HOST_GATEWAY = "host.containers.internal"


def _image(ctx: CheckContext, service: Service) -> str | None:
    if service.kind == "container":
        return service.image
    runtime = ctx.fleet.runtimes.get(service.runtime or "")
    return None if runtime is None else runtime.image


@rule(
    "container-without-unit",
    "L-38",
    "error",
    "a container with no unit is not deployed: nothing restarts it or starts it at boot",
)
def container_unit(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        if _image(ctx, service) is not None and service.backend == "process":
            yield Hit(
                name,
                f"services.{name}.backend",
                f"container service {name!r} has backend process (no unit)",
                "use backend: quadlet (or systemd) so it is boot-persistent and self-healing",
            )


@rule(
    "restart-disabled",
    "L-38",
    "error",
    "a unit with Restart=no does not heal itself",
)
def restart_off(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        if service.backend != "process" and service.unit.restart == "no":
            yield Hit(
                name,
                f"services.{name}.unit.restart",
                f"service {name!r} is never restarted after a crash",
                "use restart: always (the default) or on-failure",
            )


@rule(
    "user-unit-without-linger",
    "L-38",
    "error",
    "a user unit starts at boot only when its user lingers",
)
def linger(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        if service.backend == "process" or service.unit.scope != "user":
            continue
        if not ctx.fleet.hosts[service.host].linger:
            yield Hit(
                name,
                f"services.{name}.unit.scope",
                f"service {name!r} is a user unit on {service.host!r}, which has no linger",
                "run `loginctl enable-linger <user>` on the host and set linger: true on it",
            )


@rule(
    "container-without-health",
    "L-38",
    "warning",
    "a container without a health check looks deployed while it crash-loops",
)
def container_health(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        unhealthy = service.kind == "container" and service.container.health_cmd is None
        if unhealthy and service.backend == "quadlet":
            yield Hit(
                name,
                f"services.{name}.container.health_cmd",
                f"container service {name!r} has no health_cmd",
                "give the command that proves it answers (e.g. wget -q -O /dev/null "
                "http://127.0.0.1:8080/healthz)",
            )


def _writable_mounts(service: Service) -> list[str]:
    mounts = [v.container for v in service.container.volumes if not v.read_only]
    if service.kind == "llm" or service.container.cache is not None:
        mounts.append(CACHE_MOUNT)
    return [normpath(m) for m in mounts]


@rule(
    "container-home-not-writable",
    "L-39",
    "error",
    "HOME inside the container is not on a writable mount",
)
def home_writable(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        home = service.container.home
        if home is None or _image(ctx, service) is None:
            continue
        home = normpath(home)
        places = [*_writable_mounts(service), "/tmp"]
        if not any(home == m or home.startswith(m.rstrip("/") + "/") for m in places):
            yield Hit(
                name,
                f"services.{name}.container.home",
                f"HOME {home} of container service {name!r} is not on a writable mount",
                f"put HOME under {CACHE_MOUNT} (the persistent cache mount) or a writable "
                "volume; a root-owned WORKDIR broke a cache write",
            )


@rule(
    "image-not-pinned",
    "L-42",
    "error",
    "a container image is not pinned by digest",
)
def image_pinned(ctx: CheckContext) -> Iterator[Hit]:
    for name, runtime in ctx.fleet.runtimes.items():
        if runtime.image is not None and not _DIGEST.search(runtime.image):
            yield Hit(
                None,
                f"runtimes.{name}.image",
                f"runtime {name!r} uses image {runtime.image!r} without a digest",
                "pin it: name@sha256:<digest> (`podman inspect --format '{{.Digest}}' IMAGE`)",
            )
    for name, service in ctx.fleet.services.items():
        if service.image is not None and not _DIGEST.search(service.image):
            yield Hit(
                name,
                f"services.{name}.image",
                f"service {name!r} uses image {service.image!r} without a digest",
                "pin it: name@sha256:<digest> (a tag moves; a fork's later build segfaulted)",
            )


@rule(
    "source-not-pinned",
    "L-42",
    "warning",
    "a runtime built from source does not name the commit it vendors",
)
def source_pinned(ctx: CheckContext) -> Iterator[Hit]:
    for name, runtime in ctx.fleet.runtimes.items():
        if runtime.source is not None and runtime.source.commit is None:
            yield Hit(
                None,
                f"runtimes.{name}.source",
                f"runtime {name!r} builds {runtime.source.package} {runtime.source.version} "
                "without naming its upstream commit",
                "add commit: the upstream tag or sha the sdist vendors",
            )


@rule(
    "metrics-off",
    "L-56",
    "error",
    "an llm endpoint without metrics silently drops out of monitoring",
)
def metrics_off(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        if not service.metrics_on or any(a == "--no-metrics" for a in service.extra_args):
            yield Hit(
                name,
                f"services.{name}.metrics",
                f"service {name!r} runs without its metrics endpoint (/metrics answers 501)",
                "remove `metrics: false`: every endpoint gets a scrape job and alerts",
            )


def _host_network_ports(ctx: CheckContext, host: str) -> set[int]:
    """Ports of services on ``host`` that listen on the host network (not DNATed)."""
    ports = set()
    for service in ctx.fleet.services.values():
        if service.host != host:
            continue
        if _image(ctx, service) is None or service.container.network == "host":
            ports.add(service.port)
    return ports


@rule(
    "container-host-lan-address",
    "L-57",
    "warning",
    "a container reaches a host-network service at the host's address instead of the gateway",
)
def host_address(ctx: CheckContext) -> Iterator[Hit]:
    for name, service in ctx.fleet.services.items():
        if _image(ctx, service) is None or service.container.network == "host":
            continue
        host = ctx.fleet.hosts[service.host]
        own = {host.address or service.host, service.host, "localhost", "127.0.0.1"}
        ports = _host_network_ports(ctx, service.host)
        for key, value in {**service.env, **service.container.env}.items():
            for address, port in _URL.findall(value):
                if address in own and int(port) in ports:
                    yield Hit(
                        name,
                        f"services.{name}.container.env.{key}"
                        if key in service.container.env
                        else f"services.{name}.env.{key}",
                        f"container service {name!r} reaches {address}:{port} from inside its "
                        "container; only published ports are forwarded there",
                        f"use {HOST_GATEWAY}:{port} (the host gateway name podman provides)",
                    )
