"""Deploy rules: units, containers, pinning, devices, monitoring (L-27, L-38, L-39, L-42,
L-56, L-57, L-60)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from posixpath import normpath

from inferfleet.checks.engine import CheckContext, Hit, Subject, rule, service_rule
from inferfleet.doctor.findings import device_findings, pinned_findings
from inferfleet.fleetfile.base import PIN_HINT, pinned_image
from inferfleet.fleetfile.fleet import Service
from inferfleet.render.endpoints import HOST_GATEWAY
from inferfleet.render.launch import CACHE_MOUNT

_URL = re.compile(r"https?://(\[[^\]]+\]|[^/:\s]+):(\d+)")


def _image(ctx: CheckContext, service: Service) -> str | None:
    if service.kind == "container":
        return service.image
    runtime = ctx.fleet.runtimes.get(service.runtime or "")
    return None if runtime is None else runtime.image


@service_rule("container-without-unit", "L-38", "error", services="all")
def container_unit(s: Subject) -> Iterator[Hit]:
    """a container with no unit is not deployed: nothing restarts it or starts it at boot"""
    if _image(s.ctx, s.service) is not None and s.service.backend == "process":
        yield s.hit(
            "backend",
            f"container service {s.name!r} has backend process (no unit)",
            "use backend: quadlet (or systemd) so it is boot-persistent and self-healing",
        )


@service_rule("restart-disabled", "L-38", "error", services="all")
def restart_off(s: Subject) -> Iterator[Hit]:
    """a unit with Restart=no does not heal itself"""
    if s.service.backend != "process" and s.service.unit.restart == "no":
        yield s.hit(
            "unit.restart",
            f"service {s.name!r} is never restarted after a crash",
            "use restart: always (the default) or on-failure",
        )


@service_rule("user-unit-without-linger", "L-38", "error", services="all")
def linger(s: Subject) -> Iterator[Hit]:
    """a user unit starts at boot only when its user lingers"""
    user_unit = s.service.backend != "process" and s.service.unit.scope == "user"
    if user_unit and not s.host.linger:
        yield s.hit(
            "unit.scope",
            f"service {s.name!r} is a user unit on {s.service.host!r}, which has no linger",
            "run `loginctl enable-linger <user>` on the host and set linger: true on it",
        )


@service_rule("system-unit-without-become", "L-38", "error", services="all")
def system_without_become(s: Subject) -> Iterator[Hit]:
    """a system unit or Quadlet file needs root: a non-root ssh user without become fails"""
    user = s.host.ssh.user
    system = s.service.backend != "process" and s.service.unit.scope == "system"
    if system and user is not None and user != "root" and s.host.become is None:
        quadlet = s.service.backend == "quadlet"
        where = "/etc/containers/systemd" if quadlet else "/etc/systemd/system"
        yield s.hit(
            "unit.scope",
            f"service {s.name!r} installs a system unit under {where} on {s.service.host!r}, "
            f"whose ssh user {user!r} is not root and has no become",
            f"set become: sudo on host {s.service.host!r} (and give {user} a NOPASSWD sudoers "
            f"entry there: `{user} ALL=(root) NOPASSWD: /usr/bin/systemctl, /usr/bin/journalctl, "
            "/usr/bin/podman, /usr/bin/install, /usr/bin/mv, /usr/bin/rm, /usr/bin/chmod, "
            "/usr/bin/ss`), "
            "or use unit.scope: user",
        )


@service_rule("container-without-health", "L-38", "warning", services="all")
def container_health(s: Subject) -> Iterator[Hit]:
    """a container without a health check looks deployed while it crash-loops"""
    unhealthy = s.service.kind == "container" and s.service.container.health_cmd is None
    if unhealthy and s.service.backend == "quadlet":
        yield s.hit(
            "container.health_cmd",
            f"container service {s.name!r} has no health_cmd",
            "give the command that proves it answers (e.g. wget -q -O /dev/null "
            "http://127.0.0.1:8080/healthz)",
        )


def _writable_mounts(service: Service) -> list[str]:
    mounts = [v.container for v in service.container.volumes if not v.read_only]
    if service.kind == "llm" or service.container.cache is not None:
        mounts.append(CACHE_MOUNT)
    return [normpath(m) for m in mounts]


@service_rule("container-home-not-writable", "L-39", "error", services="all")
def home_writable(s: Subject) -> Iterator[Hit]:
    """HOME inside the container is not on a writable mount"""
    home = s.service.container.home
    if home is None or _image(s.ctx, s.service) is None:
        return
    home = normpath(home)
    places = [*_writable_mounts(s.service), "/tmp"]
    if not any(home == m or home.startswith(m.rstrip("/") + "/") for m in places):
        yield s.hit(
            "container.home",
            f"HOME {home} of container service {s.name!r} is not on a writable mount",
            f"put HOME under {CACHE_MOUNT} (the persistent cache mount) or a writable "
            "volume; a root-owned WORKDIR broke a cache write",
        )


# What podman will not relabel for a container (containers' go-selinux, label.Relabel):
# these folders themselves and the user's home; selinux.Chcon refuses anything under /usr.
_NO_RELABEL = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/etc/passwd", "/etc/pki", "/etc/shadow", "/home",
     "/lib", "/lib64", "/media", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys",
     "/tmp", "/usr", "/var", "/var/lib", "/var/log"}
)  # fmt: skip


def relabel_refused(host_path: str) -> bool:
    """podman refuses to relabel ``host_path`` (as written in the fleet: absolute or ~/...)."""
    path = normpath(host_path)
    return path in _NO_RELABEL or path == "~" or path.startswith("/usr/")


@service_rule("selinux-relabel-refused", "L-60", "error", services="all")
def selinux_relabel(s: Subject) -> Iterator[Hit]:
    """on an SELinux host a container's volume is a folder podman refuses to relabel"""
    if not s.host.selinux or _image(s.ctx, s.service) is None:
        return
    for index, volume in enumerate(s.service.container.volumes):
        if relabel_refused(volume.host):
            yield s.hit(
                f"container.volumes[{index}].host",
                f"container service {s.name!r} mounts {volume.host} on {s.service.host!r}, "
                "an SELinux host: podman refuses to relabel that folder, so the container "
                "does not start",
                "mount a folder of its own below it (e.g. /srv/web/data, ~/web-data) that "
                "holds only what the container needs",
            )


def _unpinned(image: str | None) -> bool:
    return image is not None and not pinned_image(image)


@rule("image-not-pinned", "L-42", "error")
def image_pinned(ctx: CheckContext) -> Iterator[Hit]:
    """a container image is not pinned by digest"""
    for name, runtime in ctx.fleet.runtimes.items():
        if _unpinned(runtime.image):
            yield Hit(
                None,
                f"runtimes.{name}.image",
                f"runtime {name!r} uses image {runtime.image!r} without a digest",
                PIN_HINT,
            )
    for s in ctx.subjects("all"):
        if _unpinned(s.service.image):
            yield s.hit(
                "image",
                f"service {s.name!r} uses image {s.service.image!r} without a digest",
                PIN_HINT,
            )


@rule("source-not-pinned", "L-42", "warning")
def source_pinned(ctx: CheckContext) -> Iterator[Hit]:
    """a runtime built from source does not name the commit it vendors"""
    for name, runtime in ctx.fleet.runtimes.items():
        # A vLLM source is a package installed as is (no commit to name).
        built = runtime.kind == "llama.cpp"
        if built and runtime.source is not None and runtime.source.commit is None:
            yield Hit(
                None,
                f"runtimes.{name}.source",
                f"runtime {name!r} builds {runtime.source.pin} without naming its upstream commit",
                "add commit: the upstream tag or sha the sdist vendors",
            )


@service_rule("metrics-off", "L-56", "error")
def metrics_off(s: Subject) -> Iterator[Hit]:
    """an llm endpoint without metrics silently drops out of monitoring"""
    if not s.service.metrics_on or any(a.flag == "--no-metrics" for a in s.extra_args):
        yield s.hit(
            "metrics",
            f"service {s.name!r} runs without its metrics endpoint (/metrics answers 501)",
            "remove `metrics: false`: every endpoint gets a scrape job and alerts",
        )


def _host_network_ports(ctx: CheckContext, host: str) -> set[int]:
    """Ports of services on ``host`` that listen on the host network (not DNATed): its
    processes and host-network containers, and the gateway and the proxy there (a process,
    or LiteLLM's Quadlet container on the host's network)."""
    ports = set()
    for service in ctx.fleet.services.values():
        if service.host != host:
            continue
        if _image(ctx, service) is None or service.container.network == "host":
            ports.add(service.port)
    for front in (ctx.fleet.gateway, ctx.fleet.proxy):
        if front is not None and front.host == host:
            ports.add(front.port)
    return ports


# host:port in a hand-written config: a Caddyfile upstream (`reverse_proxy 10.0.0.5:8080`),
# a Prometheus target ('10.0.0.5:8080'), a LiteLLM api_base (http://10.0.0.5:8080/v1).
_HOST_PORT = re.compile(
    r"(?<![\w.-])(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):(\d{1,5})(?!\d)"
)
_SETTINGS_LIMIT = 1 << 20


def _settings_addresses(s: Subject) -> Iterator[tuple[int, int, str, int]]:
    """(settings index, line, address, port) of every host:port in the settings templates."""
    for index, settings in enumerate(s.service.settings):
        try:
            with (s.ctx.root / settings.template).open("rb") as handle:
                text = handle.read(_SETTINGS_LIMIT).decode("utf-8", "replace")
        except OSError:
            continue  # settings-template-unsafe reports a missing template
        for number, line in enumerate(text.splitlines(), 1):
            for address, port in _HOST_PORT.findall(line):
                yield index, number, address.strip("[]"), int(port)


@service_rule("container-host-lan-address", "L-57", "warning", services="all")
def host_address(s: Subject) -> Iterator[Hit]:
    """a container reaches a host-network service at the host's address instead of the gateway"""
    service = s.service
    if _image(s.ctx, service) is None or service.container.network == "host":
        return
    own = {s.host.address or service.host, service.host, "localhost", "127.0.0.1", "::1"}
    ports = _host_network_ports(s.ctx, service.host)
    fix = "use {gateway}:{port} (the host gateway name podman provides)"
    for key, value in {**service.env, **service.container.env}.items():
        for address, port in _URL.findall(value):
            if address.strip("[]") in own and int(port) in ports:
                yield s.hit(
                    f"container.env.{key}" if key in service.container.env else f"env.{key}",
                    f"container service {s.name!r} reaches {address}:{port} from inside its "
                    "container; only published ports are forwarded there",
                    fix.format(gateway=HOST_GATEWAY, port=port),
                )
    # The incident itself: a Caddyfile upstream; Prometheus targets and gateway backends
    # in a container's hand-written config go the same way (L-57).
    for index, line, address, port in _settings_addresses(s):
        if address in own and port in ports:
            template = s.service.settings[index].template
            yield s.hit(
                f"settings[{index}].template",
                f"container service {s.name!r} reaches {address}:{port} from inside its "
                f"container ({template}, line {line}); only published ports are forwarded there",
                fix.format(gateway=HOST_GATEWAY, port=port),
            )


@rule("binary-not-pinned", "L-42", "error")
def binary_pinned(ctx: CheckContext) -> Iterator[Hit]:
    """a binary runtime does not pin the version and sha256 its host verifies before a start"""
    for name, runtime in ctx.fleet.runtimes.items():
        if runtime.binary is None:
            continue
        missing = [f for f in ("version", "sha256") if getattr(runtime, f) is None]
        if missing:
            yield Hit(
                None,
                f"runtimes.{name}.binary",
                f"runtime {name!r} runs {runtime.binary} without pinning its "
                f"{' and '.join(missing)}: any build at that path (a fork's) would run",
                f"on the host, `inferfleet runtime pin {name}` prints the version and sha256 "
                "to add; apply then refuses any other binary there",
            )


@rule("device-not-discovered", "L-27", "error")
def device_discovered(ctx: CheckContext) -> Iterator[Hit]:
    """a device the fleet declares is not among the GPUs doctor discovered on its host"""
    fleet = ctx.fleet
    for host_name, host in fleet.hosts.items():
        declared = [(i, d) for i, d in enumerate(host.devices) if d.vendor != "cpu"]
        if not declared:
            continue
        recorded = ctx.host_gpus(host_name)  # facts/hosts/HOST.json: `facts record --host`
        if recorded is None:
            continue  # nothing recorded: `doctor` on the host compares it live
        where = f"facts/hosts/{host_name}.json"
        again = f"then record it again (inferfleet facts record --host {host_name})"
        if recorded.gpu_source is None:
            tools = f" ({'; '.join(recorded.notes)})" if recorded.notes else ""
            for index, device in declared:
                yield Hit(
                    None,
                    f"hosts.{host_name}.devices[{index}]",
                    f"device {device.name} ({device.vendor}) of host {host_name!r}: no GPU was "
                    f"discovered there{tools} ({where})",
                    "install the driver and its tool (nvidia-smi, amd-smi or rocm-smi) or "
                    f"remove the device; {again}",
                )
            continue
        positions = {d.name: i for i, d in declared}
        for finding in device_findings(host.devices, recorded.gpus, host_name):
            if finding.check != "device-missing":
                continue  # memory and APU findings are doctor's (L-27, L-31)
            name = finding.where.rsplit(".", 1)[1]
            yield Hit(
                None,
                f"hosts.{host_name}.devices[{positions[name]}]",
                f"{finding.message} ({where})",
                f"{finding.fix}; {again}",
            )
        for finding in pinned_findings(fleet, host_name, recorded.gpus):
            service = finding.where.split(".")[1]
            yield Hit(
                service,
                finding.where,
                f"{finding.message}: its GPU passthrough names a device the host lacks ({where})",
                finding.fix,
            )
