"""Device memory and model file rules (L-10, L-31, L-32)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Subject, header_rule, rule, service_rule
from inferfleet.fleetfile.quantities import format_size
from inferfleet.gguf import Inspection
from inferfleet.runtimes import vllm
from inferfleet.runtimes.base import gpu_devices

_GIB = 1024**3
# A BIOS carve-out ("dedicated VRAM") is a few GiB up to 16; the GTT aperture of
# an APU is most of system RAM.
_CARVE_OUT_MAX = 16 * _GIB


@rule("unified-memory-dedicated-vram", "L-31", "warning")
def unified_budget(ctx: CheckContext) -> Iterator[Hit]:
    """an APU's budget looks like the dedicated-VRAM figure, not the GTT aperture"""
    for host_name, host in ctx.fleet.hosts.items():
        for index, device in enumerate(host.devices):
            if not device.unified_memory:
                continue
            small = device.memory <= _CARVE_OUT_MAX
            if small and (host.ram is None or device.memory * 4 <= host.ram):
                ram = "unknown" if host.ram is None else format_size(host.ram)
                yield Hit(
                    None,
                    f"hosts.{host_name}.devices[{index}].memory",
                    f"unified-memory device {device.name!r} on {host_name!r} has "
                    f"{format_size(device.memory)} (system RAM {ram}): that is the dedicated "
                    "VRAM carve-out tools report",
                    "give the GTT aperture (e.g. 96GiB of a 128GiB APU), and the host's ram",
                )


_ENGINES = ("vllm", "sglang")


@service_rule("gpu-memory-utilization-cap", "L-32", "error")
def memory_share(s: Subject) -> Iterator[Hit]:
    """vLLM/SGLang memory share at 1.0 has killed endpoints; keep it below, with room"""
    kind = s.runtime.kind
    share = s.service.gpu_memory_utilization
    if kind not in _ENGINES or share is None:
        return
    if share >= 1.0:
        yield s.hit(
            "gpu_memory_utilization",
            f"service {s.name!r} gives {kind} gpu_memory_utilization {share:g}: the whole "
            "device, which killed endpoints under load (L-32)",
            f"stay below 1.0 ({vllm.SHARE_MARGIN:g} was measured to work); free VRAM on a "
            f"{kind} host is estimator slack, not allocatable arena",
        )
        return
    if share <= vllm.SHARE_MARGIN:
        return
    left = [
        f"{format_size(d.memory)} {d.name!r} leaves {format_size(d.memory - int(share * d.memory))}"
        for _, d in gpu_devices(s.service, s.host)
    ]
    arithmetic = f": {share:g} of {'; '.join(left)}" if left else ""
    yield s.hit(
        "gpu_memory_utilization",
        f"service {s.name!r} gives {kind} gpu_memory_utilization {share:g}, above the "
        f"{vllm.SHARE_MARGIN:g} margin{arithmetic} for the driver, the CUDA context and "
        "anything else on the device",
        "fine when measured on this device (keep it, and record the exception with a "
        "waiver and its reason); otherwise stay at or below "
        f"{vllm.SHARE_MARGIN:g}",
        severity="warning",
    )


@header_rule("gguf-unknown-types", "L-10", "error")
def unknown_types(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """the GGUF has tensor type ids this runtime does not know (a fork's file)"""
    if facts.unknown_type_ids:
        ids = ", ".join(str(i) for i in facts.unknown_type_ids)
        yield s.hit(
            "model",
            f"model {model!r} of service {s.name!r} has tensor type id(s) {ids}, "
            "which llama.cpp does not know",
            "only the fork that wrote the file loads it: use that fork as the runtime "
            "(pinned by commit, L-42), or a file quantized with standard types",
        )
