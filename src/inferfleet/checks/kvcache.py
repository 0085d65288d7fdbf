"""KV cache type rules (L-20, L-21)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, rule
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.registry import takes_cache_type, traits

UNQUANTIZED = frozenset({"f32", "f16", "bf16"})
# K/V pairs a CUDA build compiles flash-attention kernels for without
# GGML_CUDA_FA_ALL_QUANTS (ggml-cuda/fattn.cu's default instances).
_CUDA_DEFAULT_FA = frozenset({("f16", "f16"), ("q4_0", "q4_0"), ("q8_0", "q8_0"), ("bf16", "bf16")})


@rule(
    "quantized-v-needs-flash-attn",
    "L-20",
    "error",
    "a quantized V cache needs flash attention on",
)
def quantized_v(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or service.kv_cache.v in UNQUANTIZED:
            continue
        if service.flash_attn != "on":
            yield Hit(
                name,
                f"services.{name}.flash_attn",
                f"service {name!r} quantizes V ({service.kv_cache.v}) with flash_attn "
                f"{service.flash_attn}",
                "set flash_attn: on (with auto, a device without flash attention fails the "
                "load instead)",
            )


@rule(
    "cuda-fa-all-quants",
    "L-20",
    "warning",
    "a CUDA build without GGML_CUDA_FA_ALL_QUANTS collapses prefill for this K/V pair",
)
def fa_all_quants(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        source = runtime.source
        if not traits(runtime.kind).gguf or source is None:
            continue
        pair = (service.kv_cache.k, service.kv_cache.v)
        if pair in _CUDA_DEFAULT_FA:
            continue
        host = ctx.fleet.hosts[service.host]
        if not any(d.vendor == "nvidia" for _, d in gpu_devices(service, host)):
            continue
        flags = {a.replace(" ", "") for a in source.cmake_args}
        if "-DGGML_CUDA_FA_ALL_QUANTS=ON" not in flags:
            yield Hit(
                name,
                f"runtimes.{service.runtime}.source.cmake_args",
                f"service {name!r} runs K={pair[0]} V={pair[1]} on CUDA, but runtime "
                f"{service.runtime!r} is built without GGML_CUDA_FA_ALL_QUANTS (prefill ~12x "
                "slower)",
                "add -DGGML_CUDA_FA_ALL_QUANTS=ON to the runtime's cmake_args",
            )


@rule(
    "asymmetric-kv-runtime",
    "L-21",
    "error",
    "different K and V cache types are a llama.cpp feature; other runtimes move them together",
)
def asymmetric(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        if traits(runtime.kind).asymmetric_kv or service.kv_cache.k == service.kv_cache.v:
            continue
        yield Hit(
            name,
            f"services.{name}.kv_cache",
            f"service {name!r} asks {runtime.kind} for K={service.kv_cache.k} "
            f"V={service.kv_cache.v}",
            "give k and v the same type",
        )


@rule(
    "kv-type-unsupported",
    "L-21",
    "error",
    "the runtime has no KV cache of this type",
)
def unsupported_type(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        for part in ("k", "v"):
            value = getattr(service.kv_cache, part)
            if not takes_cache_type(runtime.kind, value):
                known = ", ".join(sorted(traits(runtime.kind).cache_types))
                yield Hit(
                    name,
                    f"services.{name}.kv_cache.{part}",
                    f"service {name!r}: {runtime.kind} has no {value} KV cache",
                    f"use one of: {known}",
                )
