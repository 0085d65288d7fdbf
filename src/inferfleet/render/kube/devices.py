"""A service's devices as Kubernetes extended-resource requests, or why they cannot be.

On a host the fleet pins a service to named devices (``devices: [w7900a,
w7900b]``, a drafter's ``draft_device``, L-16); a cluster's device plugins
only count GPUs of a vendor (``nvidia.com/gpu``, ``amd.com/gpu``) and the
scheduler picks which. So a service exports when its accelerators are all of
one vendor the plugins know and nothing in the fleet names one of them in
particular by its host index. One place decides; the ``kube-gpu-request`` rule reports what
:func:`gpu_problem` says and the renderer refuses it.
"""

from __future__ import annotations

from inferfleet.fleetfile.fleet import Host, Service
from inferfleet.runtimes.base import device_index, gpu_devices

RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def gpu_problem(service: Service, host: Host) -> str | None:
    """Why the service's devices cannot be GPU requests, or None when they can."""
    devices = gpu_devices(service, host)
    vendors = sorted({d.vendor for _, d in devices})
    if len(vendors) > 1:
        return f"it spans devices of {' and '.join(vendors)}; a pod requests one GPU kind"
    if vendors and vendors[0] not in RESOURCES:
        return (
            f"its {vendors[0]} device has no resource name the exporter knows "
            f"(known: {', '.join(sorted(RESOURCES.values()))})"
        )
    if service.container.devices is not None:
        return "container.devices names device nodes, but a pod gets what its device plugin mounts"
    # The argv names devices by their index on the host (--device ROCm1); a pod sees the GPUs
    # it was given from index 0, so only a service on the host's first GPUs, in order, keeps
    # its argv meaning the same devices.
    for rank, (position, device) in enumerate(devices):
        index = device_index(position, device)
        if index != rank:
            return (
                f"its device {device.name!r} is index {index} on the host, which the argv "
                f"names; in a pod its GPUs count from 0 (it would be index {rank})"
            )
    return None


def gpu_requests(service: Service, host: Host) -> dict[str, int]:
    """``{resource: count}`` for the service's accelerators (empty on CPU).

    Call only where :func:`gpu_problem` is None.
    """
    devices = gpu_devices(service, host)
    counts: dict[str, int] = {}
    for _, device in devices:
        resource = RESOURCES[device.vendor]
        counts[resource] = counts.get(resource, 0) + 1
    return counts
