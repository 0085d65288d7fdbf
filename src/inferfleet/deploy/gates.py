"""Deploy gates: what must be true on the host before a service is touched.

Every gate runs before the old service is stopped, so a failed gate leaves
the running service as it was. Gates are cheap by design: model files are
checked by ``stat`` (L-08) and by the verification record the fetch (or
``inferfleet models verify``) wrote, never by hashing gigabytes inside a
deploy; split GGUFs must be declared whole (L-04).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from inferfleet.backends import quadlet
from inferfleet.backends.ports import listeners
from inferfleet.backends.systemd import linger_enabled
from inferfleet.deploy.errors import GateError
from inferfleet.errors import ArtifactError, PortInUseError, RuntimeInstallError
from inferfleet.fleetfile.fleet import Fleet, ModelFile
from inferfleet.hub.verified import Record
from inferfleet.models import artifacts
from inferfleet.render import facts as render_paths
from inferfleet.render.facts import HostFacts
from inferfleet.render.pipeline import ServiceLaunch

_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$")
PORT_WAIT_S = 15.0


@dataclass(frozen=True)
class Gate:
    check: str  # model:NAME | runtime | image | devices | linger | quadlet
    detail: str


def gates_for(desired: ServiceLaunch, fleet: Fleet, root: Path, facts: HostFacts) -> list[Gate]:
    """The gates of one service, described for the plan (nothing is checked here)."""
    service = desired.service
    found: list[Gate] = []
    for name in desired.models:
        files = artifacts.declared_files(fleet.models[name], root)
        total = sum(f.size for f in files)
        found.append(
            Gate(
                f"model:{name}",
                f"model {name}: {len(files)} file(s), {total:,} bytes, by stat and the "
                "verification record",
            )
        )
    runtime = fleet.runtimes.get(service.runtime or "")
    if runtime is not None and runtime.image is None:
        binary = render_paths.runtime_binary(runtime, facts)
        found.append(Gate("runtime", f"runtime binary {binary} is installed"))
    if desired.image is not None:
        found.append(Gate("image", f"image {desired.image} is in podman's storage"))
    wanted = [d for d in fleet.hosts[service.host].devices if d.name in service.devices]
    if any(d.vendor != "cpu" for d in wanted):
        found.append(Gate("devices", "devices present: " + ", ".join(d.name for d in wanted)))
    if service.backend in {"systemd", "quadlet"} and service.unit.scope == "user":
        found.append(Gate("linger", f"linger is enabled for {facts.user} (L-38)"))
    if service.backend == "quadlet":
        found.append(Gate("quadlet", "podman's Quadlet generator is installed"))
    return found


def run_gate(
    gate: Gate, desired: ServiceLaunch, fleet: Fleet, root: Path, facts: HostFacts
) -> None:
    kind, _, name = gate.check.partition(":")
    where = f"service {desired.name}"
    if kind == "model":
        check_model(name, fleet, root, where)
    elif kind == "runtime":
        runtime = fleet.runtimes[desired.service.runtime or ""]
        binary = Path(render_paths.runtime_binary(runtime, facts))
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise RuntimeInstallError(
                f"runtime binary {binary} is not installed on this host",
                where=where,
                hint="install it on the host first: inferfleet runtime install "
                f"{runtime.kind} --file <fleet.yaml> (nothing was stopped)",
            )
    elif kind == "image":
        assert desired.image is not None
        if not quadlet.image_present(facts.podman, desired.image):
            raise GateError(
                f"image {desired.image} is not in podman's local storage",
                where=where,
                hint=f"pull it on the host by digest (podman pull {desired.image}); "
                "nothing was stopped",
            )
    elif kind == "devices":
        check_devices(desired, fleet, where)
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
            "podman's Quadlet generator is not installed (podman 4.4 or later)",
            where=where,
            hint="install a podman that ships Quadlet, or use backend: systemd",
        )


def check_model(name: str, fleet: Fleet, root: Path, where: str) -> None:
    """Every declared file present with its byte count (stat), splits whole, hashes recorded."""
    model = fleet.models[name]
    files = artifacts.declared_files(model, root)
    folder = artifacts.model_dir(name, model)
    check_shards(name, files, where)
    record = Record(folder)
    for entry in files:
        path = folder / entry.path
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ArtifactError(
                f"model {name}: declared file {entry.path} is missing from {folder}",
                where=where,
                hint=f"fetch it on the host (inferfleet models fetch {name}); nothing was stopped",
            ) from None
        if st.st_size != entry.size:
            raise ArtifactError(
                f"model {name}: {path} has {st.st_size:,} bytes, the fleet declares "
                f"{entry.size:,} (L-08)",
                where=where,
                hint=f"fetch it again (inferfleet models fetch {name}); nothing was stopped",
            )
        if entry.sha256 is not None and not record.vouches(
            entry.path, st, sha256=entry.sha256, gitsha1=None
        ):
            raise ArtifactError(
                f"model {name}: {entry.path} has not been verified against its sha256 since it "
                "last changed",
                where=where,
                hint=f"verify it on the host once (inferfleet models verify {name}); deploys "
                "never hash gigabytes themselves (L-08). Nothing was stopped",
            )


def check_shards(name: str, files: list[ModelFile], where: str) -> None:
    """A split GGUF must be declared with every part, 1..N (L-04)."""
    splits: dict[str, tuple[int, set[int]]] = {}
    for entry in files:
        match = _SPLIT.match(entry.path)
        if match is None:
            continue
        count, parts = splits.setdefault(match["stem"], (int(match["count"]), set()))
        if int(match["count"]) != count:
            raise GateError(
                f"model {name}: parts of {match['stem']} disagree on the part count",
                where=where,
                hint="declare the parts of one split only",
            )
        parts.add(int(match["part"]))
    for stem, (count, parts) in splits.items():
        missing = sorted(set(range(1, count + 1)) - parts)
        if missing:
            raise GateError(
                f"model {name}: split {stem} has {count} parts but {len(parts)} are declared "
                f"(missing part {', '.join(str(m) for m in missing[:5])})",
                where=where,
                hint="declare every part (write the manifest with inferfleet models manifest); "
                "the server loads part 1 and needs all of them",
            )


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


def wait_port_free(
    desired: ServiceLaunch, *, stopped: bool = True, timeout: float = PORT_WAIT_S
) -> None:
    """Nobody may hold the service's port before it starts (L-35); we never kill a stranger.

    After this service's own process or unit was stopped, its socket may take a
    moment to close: wait up to ``timeout``. When nothing was stopped, a holder
    is a stranger from the start: refuse at once.
    """
    service = desired.service
    deadline = time.monotonic() + (timeout if stopped else 0.0)
    while True:
        held = listeners(service.port, service.bind)
        if not held:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    how = "is still held by" if stopped else "is already held by"
    after = " after the service stopped" if stopped else ""
    raise PortInUseError(
        f"port {service.port} {how} {held[0].describe()}{after}",
        where=f"service {desired.name}",
        hint="that process is not this service's (a stale server or orphan container, L-33, "
        "L-35); stop it by its pid or give the service another port, then run again. "
        "inferfleet never kills a process it did not start (L-43)",
    )
