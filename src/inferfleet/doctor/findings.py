"""Pure comparison of a host's facts with what the fleet file declares.

Each :class:`Finding` says what is wrong, where (the fleet file's host,
device or service), how bad (``error`` blocks a deploy, ``warning`` will bite
later, ``info`` is worth knowing) and the fix. The deploy's devices gate
(:mod:`inferfleet.deploy.gates`) raises the ``error`` findings of the devices
a service is pinned to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.doctor.parse import (
    APU_VRAM_MAX,
    MIB,
    Facts,
    Gpu,
    clean,
    gtt_limit,
    version_tuple,
)
from inferfleet.fleetfile.fleet import Device, Fleet, Service

# Declared memory may exceed the discovered figure by this share: tools round (a "24 GiB"
# card reports 24564 MiB), and the fleet file's sizes are typed in round numbers.
MEMORY_TOLERANCE = 0.03
MIN_PYTHON = (3, 11)
# Quadlet came in 4.4; the rendered .container files use Notify=healthy, podman 5.0's.
MIN_PODMAN_QUADLET = (5, 0)
GIB = 1024 * MIB


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str  # error | warning | info
    message: str
    where: str
    fix: str
    lesson: str | None = None


def _gib(n: int | None) -> str:
    return "unlimited" if n is None else f"{n / GIB:.1f} GiB"


def _budget(gpu: Gpu) -> int:
    """What a runtime may use on a GPU: the GTT aperture on an APU (L-31), else VRAM."""
    return gpu.gtt if gpu.unified and gpu.gtt is not None else gpu.memory


def match(device: Device, position: int, gpus: Sequence[Gpu]) -> Gpu | None:
    """The discovered GPU a declared device names: same vendor, same runtime index."""
    index = device.index if device.index is not None else position
    same = [g for g in gpus if g.vendor == device.vendor]
    return next((g for g in same if g.index == index), None)


def device_findings(devices: Sequence[Device], gpus: Sequence[Gpu], host: str) -> list[Finding]:
    """Declared devices against discovered GPUs: missing ones, and memory beyond the card.

    Only meaningful when discovery found GPUs (a host whose GPU tools are not
    installed says nothing about its devices). L-27: a budget priced against
    memory the card does not have fails at load time, after the old service
    was stopped; L-31: an APU's budget is its GTT aperture.
    """
    found: list[Finding] = []
    positions = {d.vendor: 0 for d in devices}
    for device in devices:
        if device.vendor == "cpu":
            continue
        position = positions[device.vendor]
        positions[device.vendor] += 1
        where = f"hosts.{host}.devices.{device.name}"
        gpu = match(device, position, gpus)
        if gpu is None:
            seen = ", ".join(f"{g.vendor}:{g.index}" for g in gpus) or "none"
            found.append(
                Finding(
                    "device-missing",
                    "error",
                    f"device {device.name} ({device.vendor} index "
                    f"{device.index if device.index is not None else position}) does not exist "
                    f"on {host}; discovered: {seen}",
                    where,
                    "fix the device's vendor/index in the fleet file (paste the `devices:` "
                    "snippet below), or check the driver on the host",
                )  # fmt: skip
            )
            continue
        budget = _budget(gpu)
        if device.unified_memory and gpu.gtt is not None:
            budget = gpu.gtt
        if device.memory > budget * (1 + MEMORY_TOLERANCE):
            what = "GTT aperture" if budget == gpu.gtt and gpu.gtt is not None else "memory"
            found.append(
                Finding(
                    "device-memory",
                    "error",
                    f"device {device.name} declares {_gib(device.memory)} but {host}'s "
                    f"{gpu.name or gpu.vendor} (index {gpu.index}) has {_gib(budget)} of {what}",
                    where,
                    f"set memory: {budget // MIB}MiB (or less) for {device.name}",
                    "L-27",
                )  # fmt: skip
            )
        if device.arch is not None and gpu.arch and device.arch != gpu.arch:
            found.append(
                Finding(
                    "device-arch",
                    "error",
                    f"device {device.name} declares arch {device.arch} but {host}'s "
                    f"{gpu.name or gpu.vendor} (index {gpu.index}) is {gpu.arch}: a build for "
                    f"{device.arch} has no kernels for it",
                    where,
                    f"set arch: {gpu.arch} for {device.name}",
                    "L-42",
                )  # fmt: skip
            )
        if gpu.unified and not device.unified_memory:
            found.append(
                Finding(
                    "apu-gtt",
                    "warning",
                    f"{device.name} is an APU ({_gib(gpu.memory)} dedicated, "
                    f"{_gib(gpu.gtt)} GTT) declared without unified_memory",
                    where,
                    f"declare unified_memory: true and memory: {_budget(gpu) // MIB}MiB "
                    "(the GTT aperture, not the dedicated VRAM figure)",
                    "L-31",
                )  # fmt: skip
            )
    return found


def pinned_findings(fleet: Fleet, host: str, gpus: Sequence[Gpu]) -> list[Finding]:
    """Services pinned to a declared device that discovery did not find (they cannot start)."""
    errors = {
        f.where.rsplit(".", 1)[1]: f
        for f in device_findings(fleet.hosts[host].devices, gpus, host)
        if f.check == "device-missing"
    }
    return [
        Finding(
            "service-device",
            "error",
            f"service {name} is pinned to {device}, which does not exist on {host}",
            f"services.{name}.devices",
            f"pin the service to an existing device ({errors[device].message.split('; ')[1]})",
        )  # fmt: skip
        for name, service in fleet.services.items()
        if service.host == host
        for device in service.devices
        if device in errors
    ]


def host_findings(
    facts: Facts,
    fleet: Fleet | None,
    host: str | None,
    needs: dict[str, int] | None = None,
    env_files: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Every finding of one host; ``needs`` maps a folder to the bytes the fleet puts there,
    ``env_files`` an env file apply reads as the host's user to what reads it."""
    found: list[Finding] = []
    where = f"hosts.{host}" if host else "this machine"
    for env in facts.env_files:
        if env.problem is None:
            continue
        why = (env_files or {}).get(env.path, "apply reads it")
        fix = (
            f"create it (mode 600, owned by {facts.user}) from the committed example"
            if env.problem == "missing"
            else f"make it readable by {facts.user} (chown {facts.user} {env.path}; chmod 600): "
            "apply reads it as that user, not through sudo"
        )
        found.append(
            Finding("env-file", "error", f"{env.path}: {env.problem} for {facts.user} ({why})",
                    where, fix, "L-55")
        )  # fmt: skip
    if version_tuple(facts.python) < MIN_PYTHON:
        found.append(
            Finding("python", "error", f"Python {facts.python} is too old for inferfleet",
                    where, "install Python 3.11 or later and inferfleet with it")
        )  # fmt: skip
    for disk in facts.disks:
        if disk.denied is not None:
            found.append(
                Finding("access", "warning",
                        f"{disk.path} lies under {disk.denied}, which {facts.user} may not "
                        "enter: inferfleet cannot read or write there as this user", where,
                        f"give {facts.user} access to {disk.denied} (or choose a folder of its "
                        "own for the host's state_dir / the model's dir); `become: sudo` "
                        "escalates units and systemctl only")
            )  # fmt: skip
        need = (needs or {}).get(disk.path, 0)
        if disk.free is not None and need and disk.free < need:
            found.append(
                Finding("disk", "warning",
                        f"{disk.path} has {_gib(disk.free)} free; the fleet's files there "
                        f"total {_gib(need)} (less what is already downloaded)", where,
                        "free space there or move the models (model.dir / the host's state_dir)")
            )  # fmt: skip
    if facts.swap_total == 0 and facts.ram:
        found.append(
            Finding("swap", "info", "no swap: a model load that overshoots RAM is killed "
                    "outright by the OOM killer", where,
                    "add a swap file if services share RAM with other work")
        )  # fmt: skip
    found += _gtt_kernel(facts, where)
    found += _atomics(facts, where)
    if fleet is None or host is None or host not in fleet.hosts:
        return found
    declared = fleet.hosts[host]
    gpus_declared = [d for d in declared.devices if d.vendor != "cpu"]
    if facts.gpu_source is None and gpus_declared:
        found.append(
            Finding("no-gpu", "error",
                    f"no GPU was found on {host} but the fleet declares "
                    f"{', '.join(d.name for d in gpus_declared)}", where,
                    "install the driver and its tool (nvidia-smi, amd-smi or rocm-smi) or "
                    "remove the devices")
        )  # fmt: skip
    elif facts.gpu_source is not None:
        found += device_findings(declared.devices, facts.gpus, host)
        found += pinned_findings(fleet, host, facts.gpus)
    services = [(n, s) for n, s in fleet.services.items() if s.host == host]
    user_units = [n for n, s in services if s.backend != "process" and s.unit.scope == "user"]
    if user_units and not facts.linger:
        found.append(
            Finding("linger", "error",
                    f"user units ({', '.join(user_units)}) do not start at boot: lingering is "
                    f"off for {facts.user}", where,
                    f"sudo loginctl enable-linger {facts.user}", "L-38")
        )  # fmt: skip
    if user_units and not facts.user_systemd:
        found.append(
            Finding("user-systemd", "warning",
                    f"no systemd user instance runs for {facts.user}: `systemctl --user` "
                    "cannot reach it", where,
                    f"enable lingering (sudo loginctl enable-linger {facts.user}) or log in "
                    "once; over ssh set XDG_RUNTIME_DIR", "L-38")
        )  # fmt: skip
    quadlets = [n for n, s in services if s.backend == "quadlet"]
    if quadlets and (facts.podman is None or not facts.quadlet
                     or version_tuple(facts.podman) < MIN_PODMAN_QUADLET):  # fmt: skip
        have = f"podman {facts.podman}" if facts.podman else "no podman"
        found.append(
            Finding("podman", "error",
                    f"{', '.join(quadlets)} use the quadlet backend but {host} has {have}"
                    + ("" if facts.quadlet else " and no Quadlet generator"), where,
                    "install podman 5.0 or later (Quadlet with Notify=healthy, which the rendered "
                    "units use), or use backend: systemd")
        )  # fmt: skip
    contained = [n for n, s in services if s.backend != "quadlet" and _image_of(fleet, s)]
    if contained and facts.podman is None:
        found.append(
            Finding("podman", "error",
                    f"{', '.join(contained)} run in containers but {host} has no podman", where,
                    "install podman and runc (Debian/Ubuntu: apt-get install podman runc)")
        )  # fmt: skip
    if quadlets and facts.user != "root" and facts.subuids < 65536:
        found.append(
            Finding("rootless", "warning",
                    f"{facts.user} has {facts.subuids} subordinate ids: rootless podman "
                    "needs 65536", where,
                    f"sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 "
                    f"{facts.user}")
        )  # fmt: skip
    found += _selinux(facts, fleet, host, [*quadlets, *contained], where)
    mlocked = [n for n, s in services if "--mlock" in s.extra_args]
    if (
        mlocked
        and facts.memlock is not None
        and facts.memlock < max((needs or {}).values(), default=GIB)
    ):
        found.append(
            Finding("memlock", "warning",
                    f"{', '.join(mlocked)} pass --mlock but the memlock limit is "
                    f"{_gib(facts.memlock)}: the weights cannot be locked", where,
                    "set LimitMEMLOCK=infinity in the unit (or memlock unlimited in "
                    "/etc/security/limits.conf)")
        )  # fmt: skip
    return found


def _selinux(
    facts: Facts, fleet: Fleet, host: str, contained: list[str], where: str
) -> list[Finding]:
    """Containers on a host that enforces SELinux need their bind mounts relabelled (L-60);
    the fleet says whether the host does (``selinux``), the host says whether it is so."""
    declared = fleet.hosts[host].selinux
    front = [f"the {name}" for name, part in (("gateway", fleet.gateway), ("proxy", fleet.proxy))
             if part is not None and part.host == host and part.backend == "quadlet"]  # fmt: skip
    parts = [*contained, *front]
    if parts and facts.selinux == "enforcing" and not declared:
        return [
            Finding("selinux", "error",
                    f"SELinux is enforcing on {host}: the bind mounts of {', '.join(parts)} "
                    "(model, cache, config) are refused to their containers (Permission "
                    "denied) unless podman relabels them", f"{where}.selinux",
                    f"set selinux: true on host {host}: podman relabels them shared (`z`)")
        ]  # fmt: skip
    if declared and facts.selinux == "disabled":
        return [
            Finding("selinux", "info",
                    f"the fleet says {host} enforces SELinux, but SELinux is not enabled "
                    "there: the relabel option changes nothing", f"{where}.selinux",
                    "leave it (harmless) or set selinux: false")
        ]  # fmt: skip
    return []


def _image_of(fleet: Fleet, service: Service) -> str | None:
    """The image a service runs in: its own (kind: container) or its runtime's."""
    runtime = fleet.runtimes.get(service.runtime or "")
    return service.image or (None if runtime is None else runtime.image)


def _gtt_kernel(facts: Facts, where: str) -> list[Finding]:
    limit = gtt_limit(facts.gtt_params)
    apus = [g for g in facts.gpus if g.unified and g.gtt is not None]
    if limit is None or not apus:
        return []
    return [
        Finding("gtt-kernel", "info",
                f"kernel parameters bound the GTT to {_gib(limit)} "
                f"({' '.join(f'{k}={v}' for k, v in facts.gtt_params.items())}); the APU "
                f"reports {_gib(apus[0].gtt)}", where,
                "raise ttm.pages_limit (4 KiB pages) on the kernel command line to give the "
                "APU more of the RAM, then reboot", "L-31")
    ]  # fmt: skip


def _atomics(facts: Facts, where: str) -> list[Finding]:
    amd = [g for g in facts.gpus if g.vendor == "amd" and not g.unified]
    lacking = [p for p in facts.pci if p.gpu and not p.supported]
    if len(amd) < 2 or not lacking:
        return []
    return [
        Finding("pcie-atomics", "warning",
                f"PCIe AtomicOps are not supported at {', '.join(p.bus for p in lacking)}: "
                "ROCm peer-to-peer between the GPUs falls back or fails", where,
                "seat the GPUs in CPU-attached slots (not behind a chipset switch) and "
                "enable Above 4G decoding / Resizable BAR in the firmware")
    ]  # fmt: skip


def devices_yaml(gpus: Sequence[Gpu]) -> str:
    """A ``devices:`` block for the fleet file from what discovery found (L-31 for APUs)."""
    if not gpus:
        return ""
    lines = ["devices:"]
    for number, gpu in enumerate(gpus):
        name = clean(gpu.name).replace("#", "")  # the name may come from a remote host
        comment = f"  # {name}" if name else ""
        lines.append(f"  - name: gpu{number}{comment}")
        lines.append(f"    vendor: {gpu.vendor}")
        lines.append(f"    memory: {_budget(gpu) // MIB}MiB")
        if gpu.unified:
            lines.append("    unified_memory: true")
        lines.append(f"    index: {gpu.index}")
        if gpu.arch:
            lines.append(f"    arch: {gpu.arch}")
    return "\n".join(lines) + "\n"


def blocking(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


__all__ = ["APU_VRAM_MAX", "Finding", "blocking", "device_findings", "devices_yaml",
           "host_findings", "match", "pinned_findings"]  # fmt: skip
