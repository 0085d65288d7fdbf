"""One place that knows every runtime: its argv builder and its traits.

Renderers and checks ask here instead of switching on ``runtime.kind``
themselves, so adding a runtime means one adapter module and one entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from inferfleet.runtimes import llamacpp, sglang, vllm
from inferfleet.runtimes.base import AdapterError, Launch, MetricNames


@dataclass(frozen=True)
class RuntimeTraits:
    kind: str
    argv: Callable[[Launch], list[str]]
    reasoning_field: str  # where chat answers carry reasoning text (L-45)
    metrics: MetricNames  # how its /metrics names the series we alert on
    stop_grace_s: float  # how long it takes to stop cleanly after SIGTERM
    container_program: tuple[str, ...]  # argv prefix inside its container image
    cache_env: Mapping[str, str]  # compile/download caches on the /cache mount (L-37)
    cache_types: frozenset[str]  # KV cache types it takes
    asymmetric_kv: bool  # K and V cache types may differ (L-21)
    # Inherited environment variables the server would read as flags; a
    # process-backend launch drops them so only the fleet file configures it.
    stray_env_prefixes: tuple[str, ...] = ()
    # Serves GGUF files: their header facts (windows, tensor types, templates,
    # nextn layers) apply, and so do the GGUF-level flags (overrides, drafters).
    gguf: bool = False
    slots_endpoint: bool = False  # per-slot state at /slots
    pinned_build: bool = False  # `runtime install` builds it from a pinned source (L-42)


_TRAITS = {
    "llama.cpp": RuntimeTraits(
        kind="llama.cpp",
        argv=llamacpp.argv,
        reasoning_field=llamacpp.REASONING_FIELD,
        metrics=llamacpp.METRICS,
        stop_grace_s=llamacpp.STOP_GRACE_S,
        container_program=tuple(llamacpp.CONTAINER_PROGRAM),
        cache_env={"XDG_CACHE_HOME": "/cache/xdg"},
        cache_types=llamacpp.CACHE_TYPES,
        asymmetric_kv=True,
        stray_env_prefixes=("LLAMA_ARG_",),
        gguf=True,
        slots_endpoint=True,
        pinned_build=True,
    ),
    "vllm": RuntimeTraits(
        kind="vllm",
        argv=vllm.argv,
        reasoning_field=vllm.REASONING_FIELD,
        metrics=vllm.METRICS,
        stop_grace_s=vllm.STOP_GRACE_S,
        container_program=tuple(vllm.CONTAINER_PROGRAM),
        cache_env=vllm.CACHE_ENV,
        cache_types=vllm.CACHE_TYPES,
        asymmetric_kv=False,
    ),
    "sglang": RuntimeTraits(
        kind="sglang",
        argv=sglang.argv,
        reasoning_field=sglang.REASONING_FIELD,
        metrics=sglang.METRICS,
        stop_grace_s=sglang.STOP_GRACE_S,
        container_program=tuple(sglang.CONTAINER_PROGRAM),
        cache_env=sglang.CACHE_ENV,
        cache_types=sglang.CACHE_TYPES,
        asymmetric_kv=False,
    ),
}


def traits(kind: str) -> RuntimeTraits:
    try:
        return _TRAITS[kind]
    except KeyError:
        raise AdapterError(
            f"no adapter for runtime kind {kind!r}", hint=f"known: {', '.join(sorted(_TRAITS))}"
        ) from None


def takes_cache_type(kind: str, cache_type: str) -> bool:
    return cache_type in traits(kind).cache_types
