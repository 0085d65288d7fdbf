"""How a service is sized: one decision for ``budget``, ``check`` and the Kubernetes export.

It depends only on the fleet file (the runtime, the model's declared files), never on
the verb: ``llama.cpp`` (a GGUF: :func:`inferfleet.budget.fleet.fleet_request`, then
``plan``); ``rpc-split`` (split over RPC workers, :mod:`inferfleet.budget.rpc`);
``kv-pool`` (a safetensors model on vLLM: weights plus its KV pool, in the host's RAM
on vLLM's CPU build); ``engine-share`` (another exclusive engine: its share of each
device, L-32); ``none`` (no model). The window per slot, the slots, the pool (per
slot x slots, L-25) and the KV cache types are the fleet file's whatever the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.st_model import is_safetensors_model
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import Device, Fleet, Host, Service
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.registry import traits

Method = Literal["llama.cpp", "rpc-split", "kv-pool", "engine-share", "none"]


@dataclass(frozen=True)
class Sizing:
    """How service ``service`` is sized, and the shape it is sized at."""

    service: str
    method: Method
    kind: str | None  # the runtime's kind; None for a service that runs no model
    ctx_per_slot: int  # the window of one slot: the client contract (L-25)
    slots: int
    cache_type_k: str
    cache_type_v: str
    # The accelerators an exclusive engine takes (kv-pool, engine-share); empty for
    # llama.cpp (its budget places by device) and for vLLM's CPU build.
    devices: tuple[Device, ...] = ()
    reason: str = ""  # why it is not sized further (none, engine-share)

    @property
    def ctx_total(self) -> int:
        """The pool the server allocates: per-slot window x slots (L-25)."""
        return self.ctx_per_slot * self.slots

    @property
    def in_host_memory(self) -> bool:
        """A KV-pool engine on no accelerator (vLLM's CPU build): its bill is the host's RAM."""
        return self.method == "kv-pool" and not self.devices


def engine_devices(service: Service, host: Host) -> list[Device]:
    """The accelerators an exclusive engine (vLLM, SGLang) takes: the service's
    GPU devices, else the first ``tensor_parallel`` GPUs of the host (the
    engine's own default, device 0 on)."""
    listed = [device for _, device in gpu_devices(service, host)]
    if listed or service.devices:
        return listed
    gpus = [d for d in host.devices if d.vendor != "cpu"]
    return gpus[: service.tensor_parallel or 1]


def safetensors_model(fleet: Fleet, root: Path, model: str | None) -> bool:
    """Whether the model is a safetensors folder (its declared files hold a config.json).

    Declared files that cannot be read count as one: the budget then says why it
    could not size the model, instead of judging the service by another method.
    """
    if model is None:
        return False
    try:
        files = declared_files(fleet.models[model], root)
    except FleetError:
        return True
    return is_safetensors_model([f.path for f in files])


def sizing_of(fleet: Fleet, root: Path, name: str) -> Sizing:
    """The one decision of how service ``name`` is sized (see the module's text)."""
    service = fleet.services[name]
    runtime = fleet.runtimes.get(service.runtime or "")
    if service.kind != "llm" or runtime is None:
        return _sized(name, service, "none", None, reason="not an llm service")
    kind = runtime.kind
    found = traits(kind)
    host = fleet.hosts[service.host]
    if found.kv_pool_budget and safetensors_model(fleet, root, service.model):
        return _sized(name, service, "kv-pool", kind, engine_devices(service, host))
    if not found.gguf:
        reason = f"{kind} sizes its own pool (gpu_memory_utilization)"
        if found.kv_pool_budget:
            reason += "; its model has no config.json (not a safetensors folder) to size"
        return _sized(name, service, "engine-share", kind, engine_devices(service, host), reason)
    return _sized(name, service, "rpc-split" if service.rpc else "llama.cpp", kind)


def _sized(
    name: str,
    service: Service,
    method: Method,
    kind: str | None,
    devices: list[Device] | None = None,
    reason: str = "",
) -> Sizing:
    return Sizing(
        name,
        method,
        kind,
        service.ctx_per_slot or 0,
        service.parallel,
        service.kv_cache.k,
        service.kv_cache.v,
        tuple(devices or ()),
        reason,
    )
