"""What every runtime adapter shares: the resolved launch and the runtime's traits.

An adapter turns a service into argv (a list, never a shell string) from a
:class:`Launch`, whose paths are already resolved for where the server runs
(on the host, or inside its container). Adapters never look at the host:
the renderer passes the facts in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Device, Host, Service
from inferfleet.runtimes.flags import FlagTable


class AdapterError(UsageError):
    """A service asks a runtime for something it cannot express."""


@dataclass(frozen=True)
class MetricNames:
    """How a runtime's ``/metrics`` names the series dashboards and alerts need."""

    running: str  # gauge: requests being decoded now
    waiting: str  # gauge: requests queued because every slot is busy
    prompt_tokens: str  # counter
    generation_tokens: str  # counter
    # Counters of a drafter's tokens, proposed and accepted, where the runtime counts them
    # in /metrics rather than per answer (vLLM's engine; llama.cpp reports them per answer).
    draft_tokens: str | None = None
    accepted_tokens: str | None = None

    @classmethod
    def engine(
        cls,
        prefix: str,
        running: str,
        waiting: str,
        *,
        generation_tokens: str = "generation_tokens_total",
    ) -> MetricNames:
        """Series named ``<prefix>:<name>``, as llama.cpp, vLLM and SGLang all export them."""
        return cls(
            running=f"{prefix}:{running}",
            waiting=f"{prefix}:{waiting}",
            prompt_tokens=f"{prefix}:prompt_tokens_total",
            generation_tokens=f"{prefix}:{generation_tokens}",
        )

    @property
    def prefix(self) -> str:
        """``llamacpp:``, ``vllm:``: what every series of the runtime starts with."""
        return self.running.split(":")[0] + ":"

    @property
    def series(self) -> tuple[str, ...]:
        return (self.running, self.waiting, self.prompt_tokens, self.generation_tokens)


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
    # --rpc, --device, --n-gpu-layers, --tensor-split of a model split over RPC
    # workers (inferfleet.render.rpc); they replace the service's own device flags.
    rpc_args: list[str] = field(default_factory=list)

    @property
    def alias(self) -> str:
        return self.service.model_id(self.service_name)


@dataclass(frozen=True)
class RuntimeTraits:
    """What the rest of inferfleet asks of a runtime; each adapter module exports its ``TRAITS``."""

    kind: str
    argv: Callable[[Launch], list[str]]
    flags: FlagTable  # the flags argv emits from service fields (refused in extra_args)
    reasoning_field: str  # where chat answers carry reasoning text (L-45)
    metrics: MetricNames  # how its /metrics names the series we alert on
    stop_grace_s: float  # how long it takes to stop cleanly after SIGTERM
    container_program: tuple[str, ...]  # argv prefix inside its container image
    cache_env: Mapping[str, str]  # compile/download caches on the /cache mount (L-37)
    cache_types: frozenset[str]  # KV cache types it takes
    asymmetric_kv: bool  # K and V cache types may differ (L-21)
    # Serves GGUF files: their header facts (windows, tensor types, templates,
    # nextn layers) apply, and so do the GGUF-level flags (overrides, drafters).
    gguf: bool = False
    slots_endpoint: bool = False  # per-slot state at /slots
    pinned_build: bool = False  # `runtime install` builds it from a pinned source (L-42)
    # An exclusive engine's share of each device it takes when the fleet gives none
    # (L-32: what argv renders); None: sized by its own budget (llama.cpp).
    memory_share: float | None = None
    # Its KV pool is sized from a safetensors model's config (budget/vllm_service.py).
    kv_pool_budget: bool = False
    info_path: str | None = None  # the GET that answers its release version
    # The variable it reads its API key from (never argv, L-06); None: argv only.
    key_env: str | None = None
    default_port: int = 8080  # where it listens when its command line names no port


def vendor_positions(host: Host) -> dict[str, tuple[int, Device]]:
    """Each accelerator of the host by name, with its position among the host's devices of
    its vendor: the runtime's index when the fleet gives none (``CUDA0``, ``nvidia.com/gpu=0``
    count NVIDIA GPUs only; a ``cpu`` entry or another vendor's card before it does not
    shift it), as ``doctor`` matches declared devices to discovered ones."""
    counts: dict[str, int] = {}
    found: dict[str, tuple[int, Device]] = {}
    for device in host.devices:
        if device.vendor == "cpu":
            continue
        found[device.name] = (counts.get(device.vendor, 0), device)
        counts[device.vendor] = counts.get(device.vendor, 0) + 1
    return found


def gpu_devices(service: Service, host: Host) -> list[tuple[int, Device]]:
    """The service's devices that are accelerators, each with its position among the host's
    devices of its vendor (:func:`vendor_positions`)."""
    by_name = vendor_positions(host)
    return [by_name[name] for name in service.devices if name in by_name]


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
