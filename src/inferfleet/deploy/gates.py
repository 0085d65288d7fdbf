"""Deploy gates: what must be true on the host before a service is touched.

Every gate runs before the old service is stopped, so a failed gate leaves
the running service as it was. The model gate is the one verify gate of
:mod:`inferfleet.artifacts.verify`: sizes by ``stat`` first (L-08), split
GGUFs declared whole (L-04), and a file the verification record does not
vouch for is hashed once and recorded; only a mismatch refuses. The
runtime-pin gate holds a ``binary:`` runtime to its pinned sha256 and
version (L-42, :mod:`inferfleet.deploy.pins`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.verify import Checked, gate
from inferfleet.backends import podman, quadlet
from inferfleet.backends.host_facts import discover_gpus
from inferfleet.backends.ports import listeners
from inferfleet.backends.systemd import linger_enabled
from inferfleet.deploy.errors import GateError
from inferfleet.deploy.pins import verify_binary
from inferfleet.doctor.findings import device_findings
from inferfleet.doctor.parse import Gpu
from inferfleet.errors import PortInUseError, RuntimeInstallError
from inferfleet.fleetfile.fleet import Fleet, Runtime
from inferfleet.io.become import NO_BECOME, Become, for_scope
from inferfleet.render import facts as render_paths
from inferfleet.render.facts import HostFacts
from inferfleet.render.frontdoor import Launch
from inferfleet.render.pipeline import ServiceLaunch

PORT_WAIT_S = 15.0


@dataclass(frozen=True)
class Gate:
    check: str  # model:NAME | runtime | runtime-pin | image | devices | linger | quadlet
    detail: str


def gates_for(desired: ServiceLaunch, fleet: Fleet, root: Path, facts: HostFacts) -> list[Gate]:
    """The gates of one service, described for the plan (nothing is checked here)."""
    service = desired.service
    found: list[Gate] = []
    for name in desired.models:
        files = declared_files(fleet.models[name], root)
        total = sum(f.size for f in files)
        found.append(
            Gate(
                f"model:{name}",
                f"model {name}: {len(files)} file(s), {total:,} bytes, by stat, then sha256 "
                "once where the verification record does not vouch",
            )
        )
    runtime = fleet.runtimes.get(service.runtime or "")
    if runtime is not None and runtime.image is None:
        binary = render_paths.runtime_binary(runtime, facts)
        built = (
            f" (else built here from {runtime.source.pin} first, while the running one serves)"
            if runtime.source is not None
            else ""
        )
        found.append(Gate("runtime", f"runtime binary {binary} is installed{built}"))
        if runtime.binary is not None:
            found.append(Gate("runtime-pin", _pin_detail(service.runtime or "", runtime, binary)))
    if desired.image is not None:
        found.append(
            Gate(
                "image",
                f"image {desired.image} is in podman's storage with the pinned digest (L-42)",
            )
        )
    wanted = [d for d in fleet.hosts[service.host].devices if d.name in service.devices]
    if any(d.vendor != "cpu" for d in wanted):
        found.append(
            Gate(
                "devices",
                "devices present: "
                + ", ".join(d.name for d in wanted)
                + "; discovered GPUs (nvidia-smi / amd-smi / rocm-smi / amdgpu sysfs) have them "
                "and their declared memory (L-27, L-31; skipped where no GPU tool answers)",
            )
        )
    if service.backend in {"systemd", "quadlet"} and service.unit.scope == "user":
        found.append(Gate("linger", f"linger is enabled for {facts.user} (L-38)"))
    if service.backend == "quadlet":
        found.append(Gate("quadlet", "podman's Quadlet generator is installed"))
    return found


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _install_here(
    name: str, runtime: Runtime, root: Path, emit: Callable[[dict[str, Any]], None]
) -> None:
    """Build (llama.cpp) or install (vLLM) a pinned source missing on this host, before
    anything is stopped: the running service serves meanwhile; the deploy's lock is held, and
    a second build of the same pin waits on the build lock. Its phases are deploy events."""
    from inferfleet.install import llamacpp_build, pinned_venv
    from inferfleet.runtimes import pinned

    source = runtime.source
    assert source is not None

    def phase(text: str) -> None:
        emit({"event": "step", "kind": "build", "service": name, "detail": text})

    phase(f"runtime {source.pin} is not installed here: installing it before the deploy")
    if pinned.is_venv(runtime.kind):
        pinned_venv.install(pinned_venv.runtime_pin(runtime.kind, source), on_phase=phase)
        return
    tenths = [-1]

    def progress(done: int, total: int, _line: str) -> None:
        if total and done * 10 // total > tenths[0]:
            tenths[0] = done * 10 // total
            phase(f"compiling llama-server: {done}/{total}")

    llamacpp_build.install(source, root=root, on_progress=progress, on_phase=phase)


def run_gate(
    gate: Gate,
    desired: ServiceLaunch,
    fleet: Fleet,
    root: Path,
    facts: HostFacts,
    state_dir: Path,
    emit: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    kind, _, name = gate.check.partition(":")
    where = f"service {desired.name}"
    if kind == "model":
        check_model(name, fleet, root, where)
    elif kind == "runtime":
        runtime = fleet.runtimes[desired.service.runtime or ""]
        binary = Path(render_paths.runtime_binary(runtime, facts))
        if not _executable(binary) and runtime.source is not None:
            _install_here(desired.name, runtime, root, emit or (lambda _event: None))
        if not _executable(binary):
            raise RuntimeInstallError(
                f"runtime binary {binary} is not installed on this host",
                where=where,
                hint="install it on the host first: inferfleet runtime install "
                f"{runtime.kind} --file <fleet.yaml> (nothing was stopped)",
            )
    elif kind == "runtime-pin":
        name = desired.service.runtime or ""
        runtime = fleet.runtimes[name]
        binary = Path(render_paths.runtime_binary(runtime, facts))
        verify_binary(
            name, runtime, binary, state_dir, where=where, fix=f"inferfleet runtime pin {name}"
        )
    elif kind == "image":
        assert desired.image is not None
        if not podman.present(facts.podman):
            raise podman.missing_error(facts.podman, where)
        become = for_scope(desired.host, fleet.hosts[desired.host].become, desired.scope)
        problem = podman.image_problem(facts.podman, desired.image, become)
        if problem is not None:
            raise GateError(
                problem + " (L-42: a start never pulls)",
                where=where,
                hint=f"pull it on the host by digest (podman pull {desired.image}); "
                "nothing was stopped",
            )
    elif kind == "devices":
        check_devices(desired, fleet, where)
        check_discovered(desired, fleet, where)
    elif kind == "linger":
        if not linger_enabled(facts.user):
            raise GateError(
                f"user units of {facts.user} do not start at boot: linger is off (L-38)",
                where=where,
                hint=f"run `sudo loginctl enable-linger {facts.user}` on the host, or use a "
                "system unit (unit.scope: system)",
            )
    elif kind == "quadlet" and not quadlet.generator_present():
        raise GateError(
            "podman's Quadlet generator is not installed (podman 5.0 or later)",
            where=where,
            hint="install a podman that ships Quadlet, or use backend: systemd",
        )


def _pin_detail(name: str, runtime: Runtime, binary: str) -> str:
    """What the runtime-pin gate checks (L-42), or that there is nothing it can check."""
    if runtime.sha256 is None and runtime.version is None:
        return (
            f"runtime {name}: {binary} is NOT pinned by sha256 and version (L-42; `inferfleet "
            f"check` fails it): nothing to verify; `inferfleet runtime pin {name}` prints the pins"
        )
    wanted = []
    if runtime.sha256 is not None:
        wanted.append(f"has sha256 {runtime.sha256[:12]}…")
    if runtime.version is not None:
        wanted.append(f"reports version {runtime.version!r}")
    return f"runtime {name}: {binary} " + " and ".join(wanted) + " (L-42)"


def check_model(name: str, fleet: Fleet, root: Path, where: str) -> list[Checked]:
    """The verify gate for one model of the fleet (ArtifactError: nothing was stopped).

    Callers that show hashing progress call :func:`inferfleet.artifacts.verify.gate`.
    """
    return gate(name, fleet.models[name], root, where=where)


def check_devices(desired: ServiceLaunch, fleet: Fleet, where: str) -> None:
    missing: list[str] = []
    for position, device in enumerate(fleet.hosts[desired.service.host].devices):
        if device.name not in desired.service.devices or device.vendor == "cpu":
            continue
        index = device.index if device.index is not None else position
        nodes = {
            "nvidia": [f"/dev/nvidia{index}"],
            "amd": ["/dev/kfd", "/dev/dri"],
            "intel": ["/dev/dri"],
        }[device.vendor]
        missing += [f"{device.name} ({node})" for node in nodes if not Path(node).exists()]
    if missing:
        raise GateError(
            f"devices are not present on this host: {', '.join(missing)}",
            where=where,
            hint="check the driver (nvidia-smi / rocminfo) or the fleet file's devices; "
            "nothing was stopped",
        )


# Discovery runs the GPU tools once per apply, not once per service: an apply walks its
# services within seconds, and a GPU does not appear or vanish between two of them.
DISCOVERY_TTL_S = 60.0
SYS_ROOT = Path("/")  # where /sys is read; tests point it at a fake tree
_discovered: dict[Path, tuple[float, list[Gpu], str | None]] = {}


def discovered_gpus(root: Path | None = None) -> tuple[list[Gpu], str | None]:
    """The host's GPUs and the tool that found them (None: no GPU tool answered), memoised."""
    root = SYS_ROOT if root is None else root
    now = time.monotonic()
    cached = _discovered.get(root)
    if cached is None or now - cached[0] > DISCOVERY_TTL_S:
        gpus, source, _notes = discover_gpus(root, tools=root == Path("/"))
        cached = (now, gpus, source)
        _discovered[root] = cached
    return cached[1], cached[2]


def check_discovered(desired: ServiceLaunch, fleet: Fleet, where: str) -> None:
    """``doctor``'s blocking device checks as a gate (L-27, L-31).

    A service pinned to a device discovery did not find, or a device declaring
    more memory than the card has (beyond a rounding tolerance), would fail at
    load time after the old service was stopped: refuse before. Skipped when no
    GPU tool answers (a host without the vendor's tool says nothing).
    """
    gpus, source = discovered_gpus()
    if source is None:
        return
    service = desired.service
    host = fleet.hosts[service.host]
    problems = [
        f
        for f in device_findings(host.devices, gpus, service.host)
        if f.severity == "error" and f.where.rsplit(".", 1)[1] in service.devices
    ]
    if problems:
        raise GateError(
            "; ".join(p.message for p in problems) + f" (found by {source})",
            where=where,
            hint="; ".join(p.fix for p in problems)
            + f"; `inferfleet doctor {service.host}` shows every finding. Nothing was stopped",
        )


def wait_port_free(
    desired: Launch,
    *,
    stopped: bool = True,
    timeout: float = PORT_WAIT_S,
    become: Become = NO_BECOME,
) -> None:
    """Nobody may hold the service's port before it starts (L-35); we never kill a stranger.

    After this service's own process or unit was stopped, its socket may take a
    moment to close: wait up to ``timeout``. When nothing was stopped, a holder
    is a stranger from the start: refuse at once. ``become`` names a holder this
    user cannot see (root's) in the message.
    """
    deadline = time.monotonic() + (timeout if stopped else 0.0)
    while True:
        held = listeners(desired.port, desired.bind, become=become)
        if not held:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    how = "is still held by" if stopped else "is already held by"
    after = " after the service stopped" if stopped else ""
    raise PortInUseError(
        f"port {desired.port} {how} {held[0].describe()}{after}",
        where=f"service {desired.name}",
        hint="that process is not this service's (a stale server or orphan container, L-33, "
        "L-35); stop it by its pid or give the service another port, then run again. "
        "inferfleet never kills a process it did not start (L-43)",
    )
