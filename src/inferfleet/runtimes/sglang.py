"""SGLang adapter: a service becomes ``sglang.launch_server`` argv, as data.

SGLang's equivalents of the vLLM flags: ``--context-length`` (per-slot
window, L-25), ``--max-running-requests`` (slots), ``--mem-fraction-static``
(capped, L-32), ``--tp-size``, one ``--kv-cache-dtype`` for K and V (L-21),
``--enable-metrics`` (its ``/metrics`` is off by default, L-56). Reasoning
text lands in ``reasoning_content`` (L-45).
"""

from __future__ import annotations

from dataclasses import replace

from inferfleet.runtimes import vllm
from inferfleet.runtimes.base import AdapterError, Launch, MetricNames, require_ctx
from inferfleet.runtimes.vllm import (
    chat_template_args,
    kv_cache_dtype,
    memory_share,
    refuse_mmproj,
    tensor_parallel,
    tool_parser,
)

DEFAULT_MEM_FRACTION = 0.85
MEM_FRACTION_CAP = 0.98  # L-32
_KV_DTYPE = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
# SGLang's speculative algorithm per llama.cpp-style spec type.
_ALGORITHM = {
    "draft-mtp": "NEXTN",
    "draft-eagle3": "EAGLE3",
    "draft-simple": "STANDALONE",
    "ngram-simple": "NGRAM",
}


def argv(launch: Launch) -> list[str]:
    service = launch.service
    name = launch.service_name
    refuse_mmproj(launch, "SGLang")
    args = [
        *launch.program,
        "--model-path",
        launch.model_path,
        "--served-model-name",
        launch.alias,
        "--host",
        launch.listen_host,
        "--port",
        str(launch.listen_port),
        "--context-length",
        str(require_ctx(launch)),
        "--max-running-requests",
        str(service.parallel),
        "--mem-fraction-static",
        memory_share(launch, DEFAULT_MEM_FRACTION, MEM_FRACTION_CAP, "gpu_memory_utilization"),
        "--kv-cache-dtype",
        kv_cache_dtype("SGLang", name, service.kv_cache, _KV_DTYPE),
        "--tp-size",
        str(tensor_parallel(launch)),
    ]
    if service.metrics_on:
        args.append("--enable-metrics")
    if "image" in service.client.input:
        args.append("--enable-multimodal")
    if service.reasoning_parser is not None:
        args += ["--reasoning-parser", service.reasoning_parser]
    if service.client.tools:
        args += ["--tool-call-parser", tool_parser(launch, "SGLang", "qwen25, llama3")]
    args += chat_template_args(launch)
    if service.chat_template_kwargs:
        raise AdapterError(
            f"service {name!r}: SGLang takes template kwargs per request, not at launch",
            hint="remove chat_template_kwargs; clients send chat_template_kwargs themselves",
        )
    args += _speculative_args(launch)
    args += service.extra_args
    return args


def _speculative_args(launch: Launch) -> list[str]:
    spec = launch.service.speculative
    if spec is None or not spec.types:
        return []
    if len(spec.types) != 1 or spec.types[0] not in _ALGORITHM:
        raise AdapterError(
            f"service {launch.service_name!r}: SGLang takes one speculative algorithm "
            f"({', '.join(_ALGORITHM)}), not {', '.join(spec.types)}",
            hint="pick one type; chained n-gram drafters are a llama.cpp feature",
        )
    args = ["--speculative-algorithm", _ALGORITHM[spec.types[0]]]
    if launch.draft_model_path is not None:
        args += ["--speculative-draft-model-path", launch.draft_model_path]
    if spec.draft_max is not None:
        args += [
            "--speculative-num-steps",
            str(spec.draft_max),
            "--speculative-num-draft-tokens",
            str(spec.draft_max + 1),
        ]
    return args


# Served like vLLM (an OpenAI server in a container, 30 s to stop, one KV dtype for
# K and V); what differs is named here.
TRAITS = replace(
    vllm.TRAITS,
    kind="sglang",
    argv=argv,
    reasoning_field="reasoning_content",  # L-45
    metrics=MetricNames.engine("sglang", "num_running_reqs", "num_queue_reqs"),
    container_program=("python3", "-m", "sglang.launch_server"),
    cache_env={k: v for k, v in vllm.CACHE_ENV.items() if k != "VLLM_CACHE_ROOT"},
    cache_types=frozenset(_KV_DTYPE),
)
