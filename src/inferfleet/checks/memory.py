"""Device memory and model file rules (L-10, L-31, L-32)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Subject, header_rule, rule, service_rule
from inferfleet.fleetfile.quantities import format_size
from inferfleet.gguf import Inspection
from inferfleet.runtimes import sglang, vllm

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


_CAPS = {"vllm": vllm.GPU_MEMORY_UTILIZATION_CAP, "sglang": sglang.MEM_FRACTION_CAP}


@service_rule("gpu-memory-utilization-cap", "L-32", "error")
def memory_share(s: Subject) -> Iterator[Hit]:
    """vLLM/SGLang memory share at 1.0 has killed endpoints; cap it below"""
    kind = s.runtime.kind
    cap = _CAPS.get(kind)
    share = s.service.gpu_memory_utilization
    if cap is not None and share is not None and share > cap:
        yield s.hit(
            "gpu_memory_utilization",
            f"service {s.name!r} gives {kind} gpu_memory_utilization {share}",
            f"use at most {cap:g}; free VRAM on a {kind} host is estimator slack, "
            "not allocatable arena",
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
