"""The argv of an RPC worker and the ``--rpc`` arguments of the server it serves.

Pure: the fleet, the host's facts and the split (:mod:`inferfleet.budget.rpc`)
in, argv out. The worker binds the one address the exposure policy allows
(:func:`inferfleet.render.exposure.worker_listen_address`, L-58) and serves
one device (``-d``), so each worker is exactly one llama.cpp device ``RPCi``
on the server's side, in ``--rpc`` order.
"""

from __future__ import annotations

from inferfleet.budget.fleet import ShapeOf
from inferfleet.budget.rpc import Pool, RpcSplit, rpc_split
from inferfleet.budget.shape import ModelShape
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.rpc import worker_address, worker_of
from inferfleet.render.exposure import worker_listen_address
from inferfleet.render.facts import HostFacts
from inferfleet.runtimes.llamacpp import device_name
from inferfleet.runtimes.pinned import rpc_relpath

__all__ = [
    "endpoints",
    "rpc_launch_args",
    "server_rpc_args",
    "service_split",
    "split_pools",
    "worker_argv",
]


def worker_argv(fleet: Fleet, unit: str, facts: HostFacts) -> list[str]:
    """``ggml-rpc-server`` of the pinned build on the worker's host, on its one device."""
    found = worker_of(fleet, unit)
    if found is None:
        raise KeyError(unit)
    name, worker = found
    runtime = fleet.runtimes[fleet.services[name].runtime or ""]
    if runtime.source is None:
        raise SpecError(
            f"service {name!r} has rpc workers but its runtime is not built from a pinned source",
            hint="pin the runtime with source: so workers run the server's own build",
        )
    binary = f"{facts.cache_dir}/{rpc_relpath(runtime.source)}"
    host = fleet.hosts[worker.host]
    return [
        binary,
        "--host",
        worker_listen_address(fleet, unit),
        "--port",
        str(worker.port),
        "--device",
        device_name(host, worker.device),
    ]


def endpoints(fleet: Fleet, name: str) -> list[str]:
    """``ADDRESS:PORT`` of each worker of service ``name``, in ``--rpc`` order."""
    found = []
    for worker in fleet.services[name].rpc:
        address = worker_address(fleet, worker)
        found.append(f"[{address}]:{worker.port}" if ":" in address else f"{address}:{worker.port}")
    return found


def split_pools(fleet: Fleet, name: str) -> tuple[Pool, list[Pool], list[Pool]]:
    """(host, workers, local GPUs) of service ``name``, with their declared memory."""
    service = fleet.services[name]
    host = fleet.hosts[service.host]
    local = [d for d in host.devices if d.name in service.devices]
    cpu = [d for d in local if d.vendor == "cpu"]
    gpus = [
        Pool(d.name, device_name(host, d.name), int(d.memory), "gpu")
        for d in local
        if d.vendor != "cpu"
    ]
    if cpu:
        host_pool = Pool(cpu[0].name, "CPU", int(cpu[0].memory), "host")
    else:
        host_pool = Pool("host", "CPU", int(host.ram or 0), "host")
    workers = []
    for index, worker in enumerate(service.rpc):
        device = next(d for d in fleet.hosts[worker.host].devices if d.name == worker.device)
        label = f"worker {worker.host}:{worker.device}"
        workers.append(Pool(label, f"RPC{index}", int(device.memory), "rpc"))
    return host_pool, workers, gpus


def service_split(fleet: Fleet, name: str, shape: ModelShape) -> RpcSplit:
    """Budget's split of service ``name``'s model over its host, workers and GPUs."""
    host, workers, gpus = split_pools(fleet, name)
    return rpc_split(
        shape.n_layer,
        shape.tensors,
        host=host,
        workers=workers,
        gpus=gpus,
        tied_output=shape.tied_output,
    )


def server_rpc_args(fleet: Fleet, name: str, split: RpcSplit) -> list[str]:
    """The llama-server flags that put the split in place.

    ``--rpc`` comes before ``--device``: the RPC devices exist only once
    ``--rpc`` registered them (llama.cpp parses flags in order).
    """
    return [
        "--rpc",
        ",".join(endpoints(fleet, name)),
        "--device",
        ",".join(split.devices),
        "--n-gpu-layers",
        str(split.n_gpu_layers),
        "--tensor-split",
        ",".join(f"{share:g}" for share in split.tensor_split),
    ]


def rpc_launch_args(fleet: Fleet, name: str, shape_of: ShapeOf | None) -> list[str]:
    """The split flags of service ``name`` over its RPC workers, from its model's header.

    Every launch of a split service passes them (apply, up, show, render,
    check's argv rules): without the header there is no launch, never one
    without the split.
    """
    service = fleet.services[name]
    assert service.model is not None
    if shape_of is None:
        raise UsageError(
            f"service {name!r} is split over RPC workers: its launch needs the model's "
            "header (its layers), which is not read here",
            where=f"service {name}",
            hint="run it where the model's header can be read (its files, package or Hub "
            f"repository), e.g. after inferfleet models fetch {service.model}",
        )
    return server_rpc_args(fleet, name, service_split(fleet, name, shape_of(service.model)))
