"""A fleet service as a :class:`BudgetRequest`: the flags llama-server will get, as data.

Pure: the caller reads the model headers and passes their shapes in. What
the fleet file does not say is taken the way the llama.cpp adapter renders
it: every layer offloaded (``--n-gpu-layers 999``), one KV stream per slot
(``--no-kv-unified``), and a few flags are read back from ``extra_args``
(``-ub``/``--ubatch-size``, ``--swa-full``, ``--kv-unified``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferfleet.budget.context import ContextShape
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.placement import HOST, SplitMode, Target
from inferfleet.budget.plan import DEFAULT_HEADROOM, BudgetRequest, Drafter
from inferfleet.budget.shape import RS_ROLLBACK_ARCHS, ModelShape
from inferfleet.fleetfile.fleet import Host, Service
from inferfleet.gguf.kv import DEFAULT_UBATCH
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.flags import parse_args
from inferfleet.runtimes.llamacpp import CONTEXT_BACKED, device_name, ordered_overrides

# Spec types whose target keeps extra recurrent rows to roll back a draft
# (common_params_speculative::need_n_rs_seq).
ROLLBACK_TYPES = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark"})
DEFAULT_DRAFT_MAX = 3  # common_params_speculative_draft::n_max


def targets(service: Service, host: Host) -> tuple[Target, ...]:
    """The service's accelerators in order, then the memory the CPU side uses."""
    found = [
        Target(device.name, "gpu", device.memory, device_name(host, device.name))
        for _, device in gpu_devices(service, host)
    ]
    cpu = [d for d in host.devices if d.vendor == "cpu"]
    own_cpu = [d for d in cpu if d.name in service.devices]
    if own_cpu or cpu:
        chosen = (own_cpu or cpu)[0]
        found.append(Target(chosen.name, "host", chosen.memory, "CPU"))
    else:
        found.append(Target(HOST, "host", host.ram, "CPU"))
    return tuple(found)


@dataclass(frozen=True)
class ServerFlags:
    """What the budget reads back from ``extra_args``."""

    n_ubatch: int = DEFAULT_UBATCH
    swa_full: bool = False
    unified: bool = False


_UBATCH = ("-ub", "--ubatch-size")
_UNIFIED = {"-kvu": True, "--kv-unified": True, "-no-kvu": False, "--no-kv-unified": False}
_BOOLEAN = ("--swa-full", *_UNIFIED)


def server_flags(extra_args: Sequence[str]) -> ServerFlags:
    """The flags of ``extra_args`` that change the budget, read by the one parser."""
    args = parse_args(extra_args, lambda flag: 0 if flag in _BOOLEAN else None)
    ubatch, swa_full, unified = DEFAULT_UBATCH, False, False
    for arg in args:
        if arg.flag in _UBATCH:
            value = arg.value or ""
            if not value.isdigit() or int(value) <= 0:
                raise BudgetError(
                    f"extra_args has {arg.flag} {value!r}: the micro-batch must be a positive "
                    "number"
                )
            ubatch = int(value)
        elif arg.flag == "--swa-full":
            swa_full = True
        elif arg.flag in _UNIFIED:
            unified = _UNIFIED[arg.flag]
    return ServerFlags(ubatch, swa_full, unified)


def service_request(
    service: Service,
    host: Host,
    model: ModelShape,
    *,
    ctx_per_slot: int | None = None,
    drafter_model: ModelShape | None = None,
    projector_bytes: int | None = None,
    headroom: int = DEFAULT_HEADROOM,
) -> BudgetRequest:
    """The request for one llama.cpp service at its own (or the given) per-slot context."""
    per_slot = ctx_per_slot or service.ctx_per_slot
    if per_slot is None:
        raise BudgetError(
            "the service has no ctx_per_slot", hint="set ctx_per_slot (the client contract, L-25)"
        )
    flags = server_flags(service.extra_args)
    spec = service.speculative
    n_rs_seq = 0
    rolls_back = spec is not None and bool(ROLLBACK_TYPES & set(spec.types))
    if spec is not None and rolls_back and model.architecture in RS_ROLLBACK_ARCHS:
        n_rs_seq = spec.draft_max or DEFAULT_DRAFT_MAX
    context = ContextShape(
        ctx=per_slot * service.parallel,
        parallel=service.parallel,
        cache_type_k=service.kv_cache.k,
        cache_type_v=service.kv_cache.v,
        flash_attn=service.flash_attn != "off",
        n_ubatch=flags.n_ubatch,
        unified=flags.unified,
        swa_full=flags.swa_full,
        n_rs_seq=n_rs_seq,
    )
    drafter = None
    if spec is not None and CONTEXT_BACKED & set(spec.types):
        kv = spec.draft_kv_cache
        drafter = Drafter(
            model=drafter_model,
            cache_type_k=kv.k if kv is not None else "f16",
            cache_type_v=kv.v if kv is not None else "f16",
            device=spec.draft_device,
        )
    split_mode: SplitMode = service.split_mode or "layer"
    return BudgetRequest(
        model=model,
        context=context,
        targets=targets(service, host),
        split_mode=split_mode,
        shares=tuple(service.tensor_split),
        # In the order the server gets them: first match wins (L-17).
        overrides=tuple(ordered_overrides(service, host)),
        projector_bytes=projector_bytes,
        drafter=drafter,
        headroom=headroom,
    )


def assumptions(service: Service) -> list[str]:
    """What the budget assumed that the fleet file leaves to the server."""
    notes = []
    if service.flash_attn == "auto":
        notes.append(
            "flash_attn auto: sized with flash attention on (llama.cpp enables it wherever "
            "the device supports it)"
        )
    if "-nkvo" in service.extra_args or "--no-kv-offload" in service.extra_args:
        notes.append(
            "extra_args keeps the KV cache in host memory; this budget places it per layer"
        )
    return notes
