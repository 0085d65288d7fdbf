"""KV cache type rules (L-20, L-21)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import Hit, Subject, service_rule
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.llamacpp import UNQUANTIZED
from inferfleet.runtimes.registry import takes_cache_type

# K/V pairs a CUDA build compiles flash-attention kernels for without
# GGML_CUDA_FA_ALL_QUANTS (ggml-cuda/fattn.cu's default instances).
_CUDA_DEFAULT_FA = frozenset({("f16", "f16"), ("q4_0", "q4_0"), ("q8_0", "q8_0"), ("bf16", "bf16")})


@service_rule("quantized-v-needs-flash-attn", "L-20", "error", services="gguf")
def quantized_v(s: Subject) -> Iterator[Hit]:
    """a quantized V cache needs flash attention on"""
    service = s.service
    if service.kv_cache.v not in UNQUANTIZED and service.flash_attn != "on":
        yield s.hit(
            "flash_attn",
            f"service {s.name!r} quantizes V ({service.kv_cache.v}) with flash_attn "
            f"{service.flash_attn}",
            "set flash_attn: on (with auto, a device without flash attention fails the "
            "load instead)",
        )


@service_rule("cuda-fa-all-quants", "L-20", "warning", services="gguf")
def fa_all_quants(s: Subject) -> Iterator[Hit]:
    """a CUDA or HIP build without GGML_CUDA_FA_ALL_QUANTS collapses prefill for this K/V pair"""
    service, source = s.service, s.runtime.source
    pair = (service.kv_cache.k, service.kv_cache.v)
    if source is None or pair in _CUDA_DEFAULT_FA:
        return
    # HIP compiles the same ggml-cuda flash-attention instances, behind the same flag.
    if not any(d.vendor in ("nvidia", "amd") for _, d in gpu_devices(service, s.host)):
        return
    flags = {a.replace(" ", "") for a in source.flags}
    if "-DGGML_CUDA_FA_ALL_QUANTS=ON" not in flags:
        yield Hit(
            s.name,
            f"runtimes.{service.runtime}.source.cmake_args",
            f"service {s.name!r} runs K={pair[0]} V={pair[1]} on CUDA/HIP, but runtime "
            f"{service.runtime!r} is built without GGML_CUDA_FA_ALL_QUANTS (prefill ~12x "
            "slower)",
            "add -DGGML_CUDA_FA_ALL_QUANTS=ON to the runtime's cmake_args (or "
            'cmake: {GGML_CUDA_FA_ALL_QUANTS: "ON"})',
        )


@service_rule("asymmetric-kv-runtime", "L-21", "error")
def asymmetric(s: Subject) -> Iterator[Hit]:
    """different K and V cache types are a llama.cpp feature; other runtimes move them together"""
    cache = s.service.kv_cache
    if not s.traits.asymmetric_kv and cache.k != cache.v:
        yield s.hit(
            "kv_cache",
            f"service {s.name!r} asks {s.runtime.kind} for K={cache.k} V={cache.v}",
            "give k and v the same type",
        )


@service_rule("kv-type-unsupported", "L-21", "error")
def unsupported_type(s: Subject) -> Iterator[Hit]:
    """the runtime has no KV cache of this type"""
    kind = s.runtime.kind
    for part in ("k", "v"):
        value = getattr(s.service.kv_cache, part)
        if not takes_cache_type(kind, value):
            known = ", ".join(sorted(s.traits.cache_types))
            yield s.hit(
                f"kv_cache.{part}",
                f"service {s.name!r}: {kind} has no {value} KV cache",
                f"use one of: {known}",
            )
