"""A fleet's services as budgets, and every device's bill summed over the services sharing it.

``inferfleet budget`` sizes one llama.cpp service at a time; ``inferfleet
check`` asks whether each device holds everything placed on it. Both build a
service's :class:`~inferfleet.budget.plan.BudgetRequest` here
(:func:`fleet_request`), from header shapes the caller reads (a local file, a
remote header, a check context's cache), so there is one sizing model.

The only things this module reads are the fleet's declared files (a
manifest) and, for a projector not declared there, its size by ``stat``.

A device's bill (:class:`Pool`) adds

- each llama.cpp service's :class:`~inferfleet.budget.plan.DeviceUse` on it
  (weights, KV, compute, output, projector, drafter);
- each vLLM/SGLang service's declared share: ``gpu_memory_utilization``
  (``--mem-fraction-static`` for SGLang) x the device's memory, or the
  engine's default share (L-32: the engine claims its share at start, and what
  it leaves free is estimator slack, not room for someone else);
- the headroom once, when a llama.cpp service is there (``--fit``'s margin;
  an engine's share already leaves ``1 - share`` free).

On a unified-memory APU the accelerator's pool is its GTT aperture (L-31), and
that aperture is system RAM: :func:`host_pools` adds a pool for the host's RAM
holding the APU devices' bills and the host-memory bill together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from inferfleet.artifacts.locate import model_dir
from inferfleet.artifacts.manifest import declared_files
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.placement import HOST
from inferfleet.budget.plan import DEFAULT_HEADROOM, Budget, BudgetRequest
from inferfleet.budget.service import assumptions, service_request
from inferfleet.budget.shape import ModelShape
from inferfleet.budget.sizing import engine_devices
from inferfleet.fleetfile.fleet import Fleet, Host, Service
from inferfleet.runtimes.registry import traits

ShapeOf = Callable[[str], ModelShape]  # model name -> its header shape, or FleetError


# ---------------------------------------------------------------- one service


def projector_size(fleet: Fleet, root: Path, model_name: str, mmproj: str) -> int:
    """The projector file's size: declared in the fleet, else by stat (L-08)."""
    model = fleet.models[model_name]
    declared = {f.path: f.size for f in declared_files(model, root)}
    if mmproj in declared:
        return declared[mmproj]
    path = model_dir(model_name, model) / mmproj
    try:
        return path.stat().st_size
    except OSError:
        raise BudgetError(
            f"the projector {mmproj!r} is neither declared in model {model_name!r}'s files "
            "nor here",
            where=str(path),
            hint="declare it (path, size, sha256) in the model's files or manifest",
        ) from None


def fleet_request(
    fleet: Fleet,
    root: Path,
    name: str,
    shape_of: ShapeOf,
    *,
    ctx_per_slot: int | None = None,
    headroom: int = DEFAULT_HEADROOM,
) -> BudgetRequest:
    """The budget request of llama.cpp service ``name``: its model's and its
    drafter's shapes, its projector, and the assumptions noted."""
    service = fleet.services[name]
    host = fleet.hosts[service.host]
    if service.model is None:
        raise BudgetError(f"service {name!r} serves no model; budgets size llm services")
    shape = shape_of(service.model)
    drafter = None if service.drafter is None else shape_of(service.drafter)
    projector = None
    if service.mmproj is not None:
        projector = projector_size(fleet, root, service.model, service.mmproj)
    request = service_request(
        service,
        host,
        shape,
        ctx_per_slot=ctx_per_slot,
        drafter_model=drafter,
        projector_bytes=projector,
        headroom=headroom,
    )
    notes = assumptions(service)
    if notes:
        model = replace(request.model, notes=(*request.model.notes, *notes))
        request = replace(request, model=model)
    return request


def engine_share(service: Service, kind: str) -> float:
    """The share of each of its devices an exclusive engine claims (L-32): the
    fleet's, else what the adapter renders (--gpu-memory-utilization /
    --mem-fraction-static)."""
    share = service.gpu_memory_utilization
    default = traits(kind).memory_share
    assert default is not None, f"{kind} is not an exclusive engine"
    return default if share is None else share


# ---------------------------------------------------------------- devices


@dataclass(frozen=True)
class Use:
    service: str
    bytes: int
    what: str  # "llama.cpp budget" or "vllm share 0.9"


@dataclass
class Pool:
    """One memory pool of a host and everything placed in it."""

    host: str
    name: str  # the device's name, or "host" (the host's RAM without a cpu device)
    memory: int | None
    path: str  # the fleet path that states the memory: hosts.gpu.devices[0].memory
    uses: list[Use] = field(default_factory=list)
    headroom: int = 0

    @property
    def used(self) -> int:
        return sum(u.bytes for u in self.uses)

    @property
    def over(self) -> int | None:
        """Bytes above the pool (with its headroom); None when it fits or its size is unknown."""
        if self.memory is None:
            return None
        over = self.used + self.headroom - self.memory
        return over if over > 0 else None

    @property
    def services(self) -> list[str]:
        return list(dict.fromkeys(u.service for u in self.uses))


def _host_memory(service: Service, host: Host) -> tuple[str, int | None]:
    """The pool a CPU engine fills: the service's cpu device, the host's first, or its RAM."""
    cpus = [d for d in host.devices if d.vendor == "cpu"]
    chosen = [d for d in cpus if d.name in service.devices] or cpus
    if chosen:
        return chosen[0].name, chosen[0].memory
    return HOST, host.ram


def _device_field(host_name: str, host: Host, device_name: str) -> str:
    for index, device in enumerate(host.devices):
        if device.name == device_name:
            return f"hosts.{host_name}.devices[{index}].memory"
    return f"hosts.{host_name}.ram"


def host_pools(
    fleet: Fleet,
    host_name: str,
    budgets: Mapping[str, Budget],
    engines: Iterable[tuple[str, str]] = (),
    host_bills: Mapping[str, int] | None = None,
) -> list[Pool]:
    """Every pool of ``host_name`` with what ``budgets`` (llama.cpp services by
    name), ``engines`` ((service, kind) of vLLM/SGLang services) and
    ``host_bills`` (vLLM on CPU: weights + KV pool, by service) put there.

    On a host with unified-memory devices and a known ``ram``, the last pool is
    the system RAM, holding those devices' bills and the host-memory bill (L-31).
    """
    host = fleet.hosts[host_name]
    pools: dict[str, Pool] = {}

    def pool(name: str, memory: int | None) -> Pool:
        if name not in pools:
            pools[name] = Pool(host_name, name, memory, _device_field(host_name, host, name))
        return pools[name]

    for service_name, budget in budgets.items():
        for use in budget.devices:
            if not use.used:
                continue
            target = pool(use.target.name, use.target.memory)
            target.uses.append(Use(service_name, use.used, "llama.cpp budget"))
            target.headroom = max(target.headroom, use.headroom)
    for service_name, kind in engines:
        service = fleet.services[service_name]
        share = engine_share(service, kind)
        for device in engine_devices(service, host):
            target = pool(device.name, device.memory)
            what = f"{kind} share {share:g}"
            target.uses.append(Use(service_name, int(device.memory * share), what))
    for service_name, used in (host_bills or {}).items():
        service = fleet.services[service_name]
        target = pool(*_host_memory(service, host))
        target.uses.append(Use(service_name, used, "vllm weights + KV pool"))
    found = list(pools.values())
    unified = {d.name for d in host.devices if d.unified_memory}
    host_memory = {d.name for d in host.devices if d.vendor == "cpu"} | {HOST}
    if not unified or host.ram is None or not any(p.name in unified for p in found):
        return found
    # The GTT aperture is system RAM: the APU's bills and the host's share it (L-31).
    # A pool of the host's RAM itself is folded in rather than judged twice.
    ram = Pool(host_name, "system RAM", host.ram, f"hosts.{host_name}.ram")
    for part in found:
        if part.name in unified or part.name in host_memory:
            ram.uses.extend(part.uses)
            ram.headroom = max(ram.headroom, part.headroom)
    return [p for p in found if p.name != HOST] + [ram]
