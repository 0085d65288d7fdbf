"""How llama.cpp is built for the hosts that run it (L-20, L-42).

A source build's backend follows the devices of the hosts that run it (CUDA
with the cards' compute capabilities, HIP with their gfx targets): one build
cannot serve two vendors, and a build whose architectures are named by hand
must name every card it will run on, or the server has no kernels for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, rule
from inferfleet.fleetfile.fleet import Device, Runtime

BACKENDS = {"GGML_CUDA": "CUDA (NVIDIA)", "GGML_HIP": "HIP (AMD)", "GGML_VULKAN": "Vulkan (Intel)"}
# What names a build's architectures, per vendor (the newer GPU_TARGETS spelling too).
ARCH_VARS = {
    "nvidia": ("CMAKE_CUDA_ARCHITECTURES",),
    "amd": ("AMDGPU_TARGETS", "GPU_TARGETS"),
}
ANY_ARCH = {"native", "all", "all-major"}


def _given(runtime: Runtime, names: tuple[str, ...]) -> list[str] | None:
    """The architectures the source names itself for one vendor, or None where it names none."""
    assert runtime.source is not None
    values = [v for k, v in runtime.source.given.items() if k in names]
    if not values:
        return None
    found = [a.strip() for v in values for a in re.split(r"[;,]", v) if a.strip()]
    return [a.split("-")[0] for a in found]  # 86-real, 86-virtual: the architecture 86


def _arch(ctx: CheckContext, host: str, device: Device, position: int) -> str | None:
    """The device's architecture: declared, else what `doctor` recorded for that index."""
    if device.arch is not None:
        return device.arch
    recorded = ctx.host_gpus(host)
    index = device.index if device.index is not None else position
    for gpu in recorded.gpus if recorded is not None else ():
        if gpu.vendor == device.vendor and gpu.index == index and gpu.arch:
            return gpu.arch
    return None


@rule("runtime-mixed-backends", "L-42", "error")
def mixed_backends(ctx: CheckContext) -> Iterator[Hit]:
    """one llama.cpp build asked to run on GPUs of two vendors"""
    for name, runtime in ctx.fleet.runtimes.items():
        if runtime.kind != "llama.cpp" or runtime.source is None:
            continue
        backends = [BACKENDS[k] for k in BACKENDS if runtime.source.derived.get(k) == "ON"]
        if len(backends) > 1:
            yield Hit(
                None,
                f"runtimes.{name}.source",
                f"runtime {name!r} runs on hosts with {' and '.join(backends)} devices "
                f"({', '.join(ctx.fleet.runtime_hosts(name))}); one build has one GPU backend",
                "give each backend its own runtime (the same source), and its services that one",
            )


@rule("build-arch-missing", "L-42", "error")
def arch_missing(ctx: CheckContext) -> Iterator[Hit]:
    """a build's GPU architectures, named by hand, leave out a card it runs on"""
    for name, runtime in ctx.fleet.runtimes.items():
        if runtime.kind != "llama.cpp" or runtime.source is None:
            continue
        for vendor, names in ARCH_VARS.items():
            given = _given(runtime, names)
            if given is None or ANY_ARCH & set(given):
                continue
            for host in ctx.fleet.runtime_hosts(name):
                same = [d for d in ctx.fleet.hosts[host].devices if d.vendor == vendor]
                for position, device in enumerate(same):
                    arch = _arch(ctx, host, device, position)
                    if arch is None:
                        continue
                    wanted = arch.removeprefix("sm_")
                    if wanted not in given:
                        yield Hit(
                            None,
                            f"runtimes.{name}.source",
                            f"runtime {name!r} is built for {names[0]}={';'.join(given)}, but "
                            f"{host}'s {device.name} is {arch}: the server has no kernels for it",
                            f"add {wanted} to {names[0]}, or leave it out (the build then "
                            "follows the declared devices' arch)",
                        )
