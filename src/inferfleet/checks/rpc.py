"""A model split over RPC workers fits each of its devices (L-27).

The split is the one the launch passes (:func:`inferfleet.render.rpc.service_split`):
each pool (the host, each worker's device, each local GPU) must hold the
weights it gets. The regular per-host budget (``device-memory-fit``) leaves
these services out: it would size the whole model on the service's host.
"""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.errors import FleetError
from inferfleet.render.rpc import service_split


@rule("rpc-split-fit", "L-27", "error")
def rpc_split_fit(ctx: CheckContext) -> Iterator[Hit | Skip]:
    """a device of a model split over RPC workers gets more weights than its memory"""
    fleet = ctx.fleet
    for name, service in fleet.services.items():
        if not service.rpc or service.model is None or service.model not in fleet.models:
            continue
        try:
            split = service_split(fleet, name, ctx.shape_of(service.model))
        except FleetError as exc:
            reason = f"the RPC split of service {name!r} is not sized: {exc.message}"
            yield Skip(name, reason, exc.message)
            continue
        for line in split.overflows():
            yield Hit(
                name,
                f"services.{name}.rpc",
                f"service {name!r} is split over RPC workers (--n-gpu-layers "
                f"{split.n_gpu_layers}); {line}",
                "add a worker or a device with more memory, or serve a smaller quantisation; "
                "the split follows each device's declared memory",
            )
