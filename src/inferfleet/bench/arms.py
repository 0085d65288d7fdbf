"""Benchmark arms: running services, URLs, or servers the bench starts itself.

An arms file compares several endpoints, or several configurations of one
service::

    arms:
      - name: f16-cache
        start: {service: gemma}
      - name: q8-cache
        start: {service: gemma, set: {kv_cache: {k: q8_0, v: q8_0}}}
      - name: prod
        service: gemma          # already running (inferfleet up)
      - name: other-box
        url: http://127.0.0.1:9000

A started arm runs the service's own argv (with ``set`` merged into its
spec) on a free port, is stopped by pid in a ``finally`` whatever happens,
and the host's available memory, and the memory in use on every GPU the
host can tell about (the doctor's readers), must come back before the next
arm is believed (L-43, L-52). It refuses to start while the production
service is running, or another service of the fleet runs on a device the
arm would use, unless told (``--share-device``): benchmarks run with
production stopped (L-52).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from inferfleet import paths
from inferfleet.backends import health as gate
from inferfleet.backends.host_facts import device_memory_used
from inferfleet.backends.ports import listeners
from inferfleet.bench.specs import validated
from inferfleet.bounded import MAX_DECLARED_TEXT, read_bounded_text
from inferfleet.client.target import Target
from inferfleet.deploy import local
from inferfleet.deploy.facts import gather, host_facts
from inferfleet.deploy.state import decide
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.fleet import Host, Service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import process
from inferfleet.runtimes.base import gpu_devices

MEMORY_WAIT_S = 30.0
Note = Callable[[str], None]
# Bytes in use per GPU ("nvidia:0"); the host's own readers unless a test hands one in.
DeviceReader = Callable[[], dict[str, int]]


class MemoryNotBackError(FleetError, OSError):
    """A stopped arm's memory did not come back: later numbers would be poisoned (L-52)."""


class StartSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    service: str = Field(description="Fleet service whose argv the arm runs.")
    port: int | None = Field(None, ge=1, le=65535, description="Default: a free port.")
    set: dict[str, Any] = Field(default_factory=dict, description="Merged into the spec.")


class ArmSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    service: str | None = None
    url: str | None = None
    start: StartSpec | None = None
    model: str | None = Field(None, description="Model id to send (default: the service alias).")

    @model_validator(mode="after")
    def _one_kind(self) -> ArmSpec:
        kinds = [k for k in ("service", "url", "start") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("an arm needs exactly one of: service, url, start")
        return self


class ArmsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    arms: list[ArmSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ArmsFile:
        names = [a.name for a in self.arms]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"arm names must be unique: {', '.join(dupes)}")
        return self


def load_arms(path: Path) -> list[ArmSpec]:
    text = read_bounded_text(
        path, MAX_DECLARED_TEXT, what="arms file", error=UsageError, hint="check the path"
    )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise UsageError(f"not valid YAML: {exc}", where=where, hint="fix the syntax") from None
    hint = "each arm has a name and one of service / url / start: {service, port, set}"
    return validated(ArmsFile, data, where=str(path), hint=hint).arms


@dataclass
class ServerLife:
    """What happened to a server the bench started (reported in the summary)."""

    pid: int
    argv: list[str]
    log: str
    healthy_after_s: float | None = None
    rss_bytes: int | None = None
    stop: str = ""
    available_before: int = 0
    available_after: int = 0
    memory_back: bool | None = None
    port_free: bool | None = None
    device_used_before: dict[str, int] = field(default_factory=dict)
    device_used_after: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ArmRun:
    name: str
    kind: str  # "running": an endpoint that was up already | "started": the bench's own
    target: Target
    server: ServerLife | None = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def arm_fleet(loaded: LoadedFleet, spec: StartSpec, arm: str) -> tuple[LoadedFleet, Service]:
    """The fleet with the arm's service rewritten: ``set`` merged, its own port."""
    fleet = loaded.fleet
    if spec.service not in fleet.services:
        raise UsageError(
            f"arm {arm!r}: no service named {spec.service!r} in {loaded.path}",
            hint=f"known services: {', '.join(sorted(fleet.services)) or '(none)'}",
        )
    data = _merged(fleet.services[spec.service].model_dump(mode="json"), spec.set)
    data["port"] = spec.port or free_port()
    try:
        service = Service.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise UsageError(
            f"arm {arm!r}: set makes an invalid service: {loc}: {first['msg']}",
            hint="`set` takes the keys of a service in the fleet file",
        ) from None
    services = {**fleet.services, spec.service: service}
    return replace(loaded, fleet=fleet.model_copy(update={"services": services})), service


def running_pid(loaded: LoadedFleet, name: str) -> int | None:
    """The pid of the fleet service ``name`` when it runs on this machine, else None."""
    service = loaded.fleet.services[name]
    state = decide(
        gather(
            name,
            host_facts(loaded.root),
            paths.state_dir(loaded.fleet.hosts[service.host]),
            None,
            endpoint=(service.bind, service.port, service.health.path),
        )
    )
    return state.pid if state.running else None


def uses(service: Service, host: Host) -> set[str]:
    """The devices a service computes on: its GPUs by name, else the host's CPU."""
    return {d.name for _, d in gpu_devices(service, host)} or {"cpu"}


def _refuse_if_running(loaded: LoadedFleet, name: str, arm: Service, *, share_device: bool) -> None:
    """Refuse while production runs, or another service shares the arm's device (L-52)."""
    pid = running_pid(loaded, name)
    if pid is not None:
        raise UsageError(
            f"service {name!r} is running (pid {pid}); benchmarks run with the "
            "production service stopped (L-52)",
            hint=f"stop it first (inferfleet down {name}), or bench it as it runs "
            f"with an arm `service: {name}`",
        )
    if share_device:
        return
    fleet = loaded.fleet
    mine = uses(arm, fleet.hosts[arm.host])  # the devices as the arm's `set` leaves them
    for other, spec in fleet.services.items():
        if other == name or spec.host != arm.host or spec.kind != "llm":
            continue
        shared = mine & uses(spec, fleet.hosts[spec.host])
        if shared and (pid := running_pid(loaded, other)) is not None:
            raise UsageError(
                f"service {other!r} is running (pid {pid}) on {', '.join(sorted(shared))}, "
                f"which the arm of {name!r} would use: the numbers would measure the "
                "contention (L-52)",
                hint=f"stop it first (inferfleet down {other}), or pass --share-device to "
                "bench next to it knowingly",
            )


@contextlib.contextmanager
def started(
    loaded: LoadedFleet,
    spec: ArmSpec,
    note: Note,
    *,
    memory_slack: int,
    share_device: bool = False,
    device_used: DeviceReader = device_memory_used,
) -> Iterator[ArmRun]:
    """Start the arm's server, yield it healthy, and always stop it by pid (L-43)."""
    assert spec.start is not None
    arm_loaded, service = arm_fleet(loaded, spec.start, spec.name)
    _refuse_if_running(loaded, spec.start.service, service, share_device=share_device)
    # The arm's launch comes from the one pipeline, as up and apply take theirs.
    prepared = local.prepare(arm_loaded, spec.start.service, local.Hooks(note=note))
    log = paths.logs_dir() / f"bench-{spec.name}.log"
    before = psutil.virtual_memory().available
    gpus_before = device_used()
    proc = process.spawn_detached(prepared.argv, log_path=log, env=prepared.process_env(os.environ))
    life = ServerLife(
        proc.pid, prepared.argv, str(log), available_before=before, device_used_before=gpus_before
    )
    note(f"arm {spec.name}: started pid {proc.pid} on port {service.port}")
    try:
        health = gate.wait_healthy(
            proc,
            service=f"bench arm {spec.name}",
            bind=service.bind,
            port=service.port,
            path=service.health.path,
            timeout=service.health.timeout,
            log_path=log,
        )
        life.healthy_after_s = round(health.seconds, 3)
        target = Target(
            label=spec.name,
            base_url=service.url(),
            model=spec.model or service.alias or spec.start.service,
            service=spec.start.service,
            ctx_per_slot=service.ctx_per_slot,
            parallel=service.parallel,
            client=service.client,
        )
        yield ArmRun(spec.name, "started", target, life)
        with contextlib.suppress(psutil.Error):
            life.rss_bytes = proc.memory_info().rss
    finally:
        life.stop = process.terminate(proc)
        life.port_free = _wait(lambda: not listeners(service.port, service.bind), 10.0)
        life.memory_back = _wait(
            lambda: _memory_back(life, device_used, memory_slack), MEMORY_WAIT_S
        )
        note(f"arm {spec.name}: stopped pid {proc.pid} ({life.stop})")
    if not life.memory_back:
        raise MemoryNotBackError(
            f"after stopping arm {spec.name!r} (pid {life.pid}) {_missing(life, memory_slack)}",
            where=f"bench arm {spec.name}",
            hint="something still holds memory (an orphaned server?); later numbers would be "
            "poisoned (L-52). Find it by pid, or raise --memory-slack if another job moved",
        )


def _memory_back(life: ServerLife, device_used: DeviceReader, slack: int) -> bool:
    """Host memory and every GPU's memory back to what they were before the arm (L-52)."""
    life.available_after = psutil.virtual_memory().available
    life.device_used_after = device_used()
    if life.available_after < life.available_before - slack:
        return False
    return all(
        life.device_used_after.get(gpu, 0) <= used + slack
        for gpu, used in life.device_used_before.items()
    )


def _missing(life: ServerLife, slack: int) -> str:
    """What did not come back, in words."""
    before, after = life.available_before, life.available_after
    gone = [
        f"{gpu} has {(life.device_used_after.get(gpu, 0) - used) >> 20} MiB more in use "
        f"than the {used >> 20} MiB before it started"
        for gpu, used in life.device_used_before.items()
        if life.device_used_after.get(gpu, 0) > used + slack
    ]
    if after < before - slack:
        gone.insert(
            0,
            f"available memory is {after >> 20} MiB, {(before - after) >> 20} MiB below the "
            f"{before >> 20} MiB before it started",
        )
    return "; ".join(gone) or "memory did not come back"


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
