"""A pod's memory request, from the budget: what the service keeps in the node's RAM.

Kubernetes requests host memory; GPU memory is the device plugin's. So the
request is the part of the service's budget that lives in system RAM:

- llama.cpp (:func:`~inferfleet.budget.fleet.fleet_request`, the one request
  builder, and :func:`~inferfleet.budget.plan.plan`): the bills of host
  memory and CPU devices (tensors overridden to the CPU, L-17) and of
  unified-memory devices, whose GTT aperture is system RAM (L-31);
- vLLM's CPU build (:func:`~inferfleet.budget.vllm_service.vllm_budget`):
  weights plus the KV pool;
- vLLM/SGLang on GPUs hold their share of the GPUs (L-32), and a model split
  over RPC workers lives partly outside the pod: no host figure is budgeted,
  so no request is made (and the renderer says so).

Which of these a service is, is :func:`~inferfleet.budget.sizing.sizing_of`'s
decision, the one ``budget`` and ``check`` take.

The header facts come from the caller (``shape_of``, ``safetensors_of``), so
this stays pure.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inferfleet.artifacts.st_model import SafetensorsModel
from inferfleet.budget import HOST, BudgetError, ModelShape, model_shape, plan
from inferfleet.budget.fleet import ShapeOf, fleet_request
from inferfleet.budget.sizing import sizing_of
from inferfleet.budget.vllm_service import vllm_budget
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.gguf import Inspection
from inferfleet.render.kube.workload import exported_services

SafetensorsOf = Callable[[str], SafetensorsModel | str]


def memory_request(
    fleet: Fleet, root: Path, name: str, shape_of: ShapeOf, safetensors_of: SafetensorsOf
) -> int | str:
    """Bytes of system RAM service ``name`` needs, or why it has no figure."""
    service = fleet.services[name]
    host = fleet.hosts[service.host]
    assert service.model is not None
    sizing = sizing_of(fleet, root, name)
    try:
        if sizing.in_host_memory:
            model = safetensors_of(service.model)
            if isinstance(model, str):
                return model
            return vllm_budget(name, service, host, model, []).host_bytes
        if sizing.method == "engine-share" and not sizing.devices:
            return sizing.reason
        if sizing.method == "rpc-split":
            return "its model is split over RPC workers; no host memory is budgeted"
        if sizing.method != "llama.cpp":
            return (
                f"{sizing.kind} on GPUs holds its share of the GPU memory; "
                "no host memory is budgeted"
            )
        budget = plan(fleet_request(fleet, root, name, shape_of))
    except FleetError as exc:
        return exc.render()
    in_ram = {HOST} | {d.name for d in host.devices if d.unified_memory or d.vendor == "cpu"}
    used = sum(use.used for use in budget.devices if use.target.name in in_ram)
    if used == 0:
        return "its whole budget is on GPU memory"
    return used


def memory_requests(
    fleet: Fleet,
    root: Path,
    header_of: Callable[[str], Inspection | str],
    safetensors_of: SafetensorsOf,
) -> tuple[dict[str, int], dict[str, str]]:
    """The exported services' memory requests, and why the others have none."""

    def shape_of(model: str) -> ModelShape:
        facts = header_of(model)
        if isinstance(facts, str):
            raise BudgetError(facts)
        return model_shape(facts)

    sized: dict[str, int] = {}
    unsized: dict[str, str] = {}
    for name in exported_services(fleet):
        found = memory_request(fleet, root, name, shape_of, safetensors_of)
        if isinstance(found, str):
            unsized[name] = found
        else:
            sized[name] = found
    return sized, unsized
