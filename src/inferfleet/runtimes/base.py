"""What every runtime adapter shares: the resolved launch and the runtime's traits.

An adapter turns a service into argv (a list, never a shell string) from a
:class:`Launch`, whose paths are already resolved for where the server runs
(on the host, or inside its container). Adapters never look at the host:
the renderer passes the facts in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Device, Host, Service


class AdapterError(UsageError):
    """A service asks a runtime for something it cannot express."""


@dataclass(frozen=True)
class MetricNames:
    """How a runtime's ``/metrics`` names the series dashboards and alerts need."""

    running: str  # gauge: requests being decoded now
    waiting: str  # gauge: requests queued because every slot is busy
    prompt_tokens: str  # counter
    generation_tokens: str  # counter


@dataclass(frozen=True)
class Launch:
    """A service with every path resolved for the place the server runs."""

    service_name: str
    service: Service
    host: Host
    program: list[str]  # the server binary, or e.g. ["vllm", "serve"]
    model_path: str
    listen_host: str
    listen_port: int
    draft_model_path: str | None = None
    mmproj_path: str | None = None
    chat_template_path: str | None = None
    in_container: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def alias(self) -> str:
        return self.service.alias or self.service_name


def gpu_devices(service: Service, host: Host) -> list[tuple[int, Device]]:
    """The service's devices that are accelerators, with their list index on the host."""
    by_name = {d.name: (i, d) for i, d in enumerate(host.devices)}
    picked = [by_name[name] for name in service.devices if name in by_name]
    return [(i, d) for i, d in picked if d.vendor != "cpu"]


def device_index(position: int, device: Device) -> int:
    return device.index if device.index is not None else position


def require_ctx(launch: Launch) -> int:
    ctx = launch.service.ctx_per_slot
    if ctx is None:
        raise AdapterError(
            f"service {launch.service_name!r} has no ctx_per_slot",
            hint="set ctx_per_slot: the per-slot window is the client contract (L-25)",
        )
    return ctx
