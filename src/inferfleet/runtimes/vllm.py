"""vLLM adapter: a service becomes ``vllm serve`` argv, as data.

- L-32: ``--gpu-memory-utilization`` defaults to 0.90 and is refused at or
  above the cap; 1.0 has killed endpoints, and free VRAM on a vLLM host is
  estimator slack, not allocatable arena.
- L-21: vLLM moves K and V cache types together: an asymmetric request is
  refused, not silently collapsed.
- L-25: ``--max-model-len`` is the per-slot window, ``--max-num-seqs`` the
  slots.
- L-45: reasoning text lands in ``reasoning``.

SGLang takes the same settings under its own flag names; the helpers here
that both adapters use are marked so.
"""

from __future__ import annotations

import json
from typing import Any

from inferfleet.fleetfile.fleet import KvCache
from inferfleet.runtimes.base import (
    AdapterError,
    Launch,
    MetricNames,
    RuntimeTraits,
    gpu_devices,
    require_ctx,
)

DEFAULT_GPU_MEMORY_UTILIZATION = 0.90
GPU_MEMORY_UTILIZATION_CAP = 0.98  # L-32: 0.98 worked, 1.0 killed endpoints
# vLLM's --kv-cache-dtype values for the fleet's cache types.
_KV_DTYPE = {
    "f16": "auto",
    "bf16": "auto",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
# Compile and download caches on the persistent mount (L-37: a boot re-paid 181 s of
# torch.compile on every restart without it); SGLang uses the same, less vLLM's own.
CACHE_ENV = {
    "VLLM_CACHE_ROOT": "/cache/vllm",
    "TORCHINDUCTOR_CACHE_DIR": "/cache/torchinductor",
    "TRITON_CACHE_DIR": "/cache/triton",
    "HF_HOME": "/cache/huggingface",
    "XDG_CACHE_HOME": "/cache/xdg",
}


def refuse_mmproj(launch: Launch, engine: str) -> None:
    """vLLM and SGLang load the vision tower from the model itself."""
    if launch.service.mmproj is not None:
        raise AdapterError(
            f"service {launch.service_name!r}: {engine} loads the vision tower from the model "
            "itself",
            hint="remove mmproj; list image under client.input instead",
        )


def tool_parser(launch: Launch, engine: str, examples: str) -> str:
    """The tool call parser tools need on vLLM and SGLang."""
    parser = launch.service.tool_parser
    if parser is None:
        raise AdapterError(
            f"service {launch.service_name!r}: tools on {engine} need a tool_parser",
            hint=f"set tool_parser (e.g. {examples}) for the model's format",
        )
    return parser


def chat_template_args(launch: Launch) -> list[str]:
    """``--chat-template PATH`` (vLLM and SGLang) for a service with a template file."""
    if launch.service.chat_template_file is None:
        return []
    if launch.chat_template_path is None:
        raise AdapterError(f"service {launch.service_name!r}: chat template path not resolved")
    return ["--chat-template", launch.chat_template_path]


def kv_cache_dtype(kind: str, service_name: str, cache: KvCache, table: dict[str, str]) -> str:
    """The one cache dtype a runtime that moves K and V together can take (L-21)."""
    if cache.k != cache.v:
        raise AdapterError(
            f"service {service_name!r}: {kind} takes one KV cache type for K and V, "
            f"not k={cache.k} v={cache.v} (L-21)",
            hint="give k and v the same type; asymmetric K/V is a llama.cpp feature",
        )
    if cache.k not in table:
        raise AdapterError(
            f"service {service_name!r}: {kind} has no {cache.k} KV cache",
            hint=f"use one of: {', '.join(sorted(table))}",
        )
    return table[cache.k]


def tensor_parallel(launch: Launch) -> int:
    service = launch.service
    if service.tensor_parallel is not None:
        return service.tensor_parallel
    return max(1, len(gpu_devices(service, launch.host)))


def memory_share(launch: Launch, default: float, cap: float, flag: str) -> str:
    value = launch.service.gpu_memory_utilization
    share = default if value is None else value
    if share > cap:
        raise AdapterError(
            f"service {launch.service_name!r}: {flag} {share:g} is above {cap:g} (L-32)",
            hint=f"use at most {cap:g}; at 1.0 the endpoint was killed under load",
        )
    return f"{share:g}"


def argv(launch: Launch) -> list[str]:
    service = launch.service
    name = launch.service_name
    refuse_mmproj(launch, "vLLM")
    args = [
        *launch.program,
        launch.model_path,
        "--served-model-name",
        launch.alias,
        "--host",
        launch.listen_host,
        "--port",
        str(launch.listen_port),
        "--max-model-len",
        str(require_ctx(launch)),
        "--max-num-seqs",
        str(service.parallel),
        "--gpu-memory-utilization",
        memory_share(
            launch,
            DEFAULT_GPU_MEMORY_UTILIZATION,
            GPU_MEMORY_UTILIZATION_CAP,
            "gpu_memory_utilization",
        ),
        "--kv-cache-dtype",
        kv_cache_dtype("vLLM", name, service.kv_cache, _KV_DTYPE),
        "--tensor-parallel-size",
        str(tensor_parallel(launch)),
    ]
    if service.reasoning_parser is not None:
        args += ["--reasoning-parser", service.reasoning_parser]
    if service.client.tools:
        parser = tool_parser(launch, "vLLM", "hermes, qwen3_coder")
        args += ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    args += chat_template_args(launch)
    if service.chat_template_kwargs:
        text = json.dumps(service.chat_template_kwargs, sort_keys=True, separators=(",", ":"))
        args += ["--default-chat-template-kwargs", text]
    if service.speculative is not None and service.speculative.types:
        config = _speculative_config(launch)
        args += ["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]
    args += service.extra_args
    return args


def _speculative_config(launch: Launch) -> dict[str, Any]:
    spec = launch.service.speculative
    assert spec is not None
    types = set(spec.types)
    tokens = spec.draft_max or 1
    if types == {"draft-mtp"}:
        config: dict[str, Any] = {"method": "mtp", "num_speculative_tokens": tokens}
    elif types == {"draft-eagle3"} and launch.draft_model_path is not None:
        config = {"method": "eagle3", "model": launch.draft_model_path}
        config["num_speculative_tokens"] = tokens
    elif types == {"draft-simple"} and launch.draft_model_path is not None:
        config = {"model": launch.draft_model_path, "num_speculative_tokens": tokens}
    elif types == {"ngram-simple"}:
        config = {"method": "ngram", "num_speculative_tokens": tokens}
    else:
        raise AdapterError(
            f"service {launch.service_name!r}: vLLM takes one speculative method "
            f"(draft-mtp, draft-eagle3 or draft-simple with a draft model, ngram-simple), "
            f"not {', '.join(spec.types)}",
            hint="pick one method; chained n-gram drafters are a llama.cpp feature",
        )
    return config


TRAITS = RuntimeTraits(
    kind="vllm",
    argv=argv,
    reasoning_field="reasoning",  # L-45
    metrics=MetricNames.engine("vllm", "num_requests_running", "num_requests_waiting"),
    stop_grace_s=30.0,
    container_program=("vllm", "serve"),
    cache_env=CACHE_ENV,
    cache_types=frozenset(_KV_DTYPE),
    asymmetric_kv=False,
)
