"""Device memory and model file rules (L-10, L-31, L-32)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.fleetfile.quantities import format_size
from inferfleet.runtimes import sglang, vllm
from inferfleet.runtimes.registry import traits

_GIB = 1024**3
# A BIOS carve-out ("dedicated VRAM") is a few GiB up to 16; the GTT aperture of
# an APU is most of system RAM.
_CARVE_OUT_MAX = 16 * _GIB


@rule(
    "unified-memory-dedicated-vram",
    "L-31",
    "warning",
    "an APU's budget looks like the dedicated-VRAM figure, not the GTT aperture",
)
def unified_budget(ctx: CheckContext) -> Iterator[Hit]:
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


@rule(
    "gpu-memory-utilization-cap",
    "L-32",
    "error",
    "vLLM/SGLang memory share at 1.0 has killed endpoints; cap it below",
)
def memory_share(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        cap = _CAPS.get(runtime.kind)
        share = service.gpu_memory_utilization
        if cap is not None and share is not None and share > cap:
            yield Hit(
                name,
                f"services.{name}.gpu_memory_utilization",
                f"service {name!r} gives {runtime.kind} gpu_memory_utilization {share}",
                f"use at most {cap:g}; free VRAM on a {runtime.kind} host is estimator slack, "
                "not allocatable arena",
            )


@rule(
    "gguf-unknown-types",
    "L-10",
    "error",
    "the GGUF has tensor type ids this runtime does not know (a fork's file)",
    header=True,
)
def unknown_types(ctx: CheckContext) -> Iterator[Hit | Skip]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or service.model is None:
            continue
        facts = ctx.header(service.model)
        if isinstance(facts, str):
            yield Skip(name, facts)
            continue
        if facts.unknown_type_ids:
            ids = ", ".join(str(i) for i in facts.unknown_type_ids)
            yield Hit(
                name,
                f"services.{name}.model",
                f"model {service.model!r} of service {name!r} has tensor type id(s) {ids}, "
                "which llama.cpp does not know",
                "only the fork that wrote the file loads it: use that fork as the runtime "
                "(pinned by commit, L-42), or a file quantized with standard types",
            )
