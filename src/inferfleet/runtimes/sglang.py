"""SGLang adapter: a service becomes ``sglang.launch_server`` argv, as data.

A ``binary:`` runtime runs what its name says (runtimes.pinned.BINARY_ENTRY): a Python
interpreter (``/opt/venv/bin/python``) gets ``-m sglang.launch_server --model-path
MODEL``; any other binary is a launcher that takes the server's flags itself.

SGLang's equivalents of the vLLM flags: ``--context-length`` (per-slot
window, L-25), ``--max-running-requests`` (slots), ``--mem-fraction-static``
(capped, L-32), ``--tp-size``, one ``--kv-cache-dtype`` for K and V (L-21),
``--enable-metrics`` (its ``/metrics`` is off by default, L-56). Reasoning
text lands in ``reasoning_content`` (L-45).
"""

from __future__ import annotations

from dataclasses import replace

from inferfleet.runtimes import vllm
from inferfleet.runtimes.base import AdapterError, Launch, MetricNames
from inferfleet.runtimes.flags import FieldFlag, FlagTable
from inferfleet.runtimes.vllm import (
    CHAT_TEMPLATE,
    HOST,
    PORT,
    REASONING_PARSER,
    SERVED_NAME,
    TOOL_PARSER,
    Server,
    chat_template_args,
    server_args,
    tool_parser,
)

DEFAULT_MEM_FRACTION = 0.85
_KV_DTYPE = {"f16": "auto", "bf16": "auto", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
# SGLang's speculative algorithm per llama.cpp-style spec type.
_ALGORITHM = {
    "draft-mtp": "NEXTN",
    "draft-eagle3": "EAGLE3",
    "draft-simple": "STANDALONE",
    "ngram-simple": "NGRAM",
}

# The flags argv emits from service fields (`python3 -m sglang.launch_server --help`).
MODEL_PATH = FieldFlag("model", ("--model-path", "--model"))
CONTEXT_LENGTH = FieldFlag("ctx_per_slot", ("--context-length",))
MAX_RUNNING = FieldFlag("parallel", ("--max-running-requests",))
MEM_FRACTION = FieldFlag("gpu_memory_utilization", ("--mem-fraction-static",))
KV_CACHE_DTYPE = FieldFlag("kv_cache", ("--kv-cache-dtype",))
TP_SIZE = FieldFlag("tensor_parallel", ("--tp-size", "--tensor-parallel-size", "--tp"))
ENABLE_METRICS = FieldFlag("metrics", ("--enable-metrics",), False)
MULTIMODAL = FieldFlag("client.input", ("--enable-multimodal",), False)
SPEC_ALGORITHM = FieldFlag("speculative.types", ("--speculative-algorithm",))
SPEC_DRAFT_MODEL = FieldFlag(
    "speculative.draft_model", ("--speculative-draft-model-path", "--speculative-draft-model")
)
SPEC_STEPS = FieldFlag("speculative.draft_max", ("--speculative-num-steps",))
SPEC_DRAFT_TOKENS = FieldFlag("speculative.draft_max", ("--speculative-num-draft-tokens",))
API_KEY = FieldFlag("secrets_env", ("--api-key",))
FLAGS = FlagTable(
    program="sglang.launch_server",
    fields=(
        MODEL_PATH, SERVED_NAME, HOST, PORT, CONTEXT_LENGTH, MAX_RUNNING, MEM_FRACTION,
        KV_CACHE_DTYPE, TP_SIZE, ENABLE_METRICS, MULTIMODAL, REASONING_PARSER, TOOL_PARSER,
        CHAT_TEMPLATE, SPEC_ALGORITHM, SPEC_DRAFT_MODEL, SPEC_STEPS, SPEC_DRAFT_TOKENS, API_KEY,
    ),
    inline_values=True,
)  # fmt: skip


SERVER = Server("SGLang", FLAGS, DEFAULT_MEM_FRACTION, _KV_DTYPE)


def argv(launch: Launch) -> list[str]:
    service = launch.service
    name = launch.service_name
    args = server_args(launch, SERVER, MODEL_PATH.emit(launch.model_path))
    if service.metrics_on:
        args += ENABLE_METRICS.emit()
    if "image" in service.client.input:
        args += MULTIMODAL.emit()
    if service.reasoning_parser is not None:
        args += REASONING_PARSER.emit(service.reasoning_parser)
    if service.client.tools:
        args += TOOL_PARSER.emit(tool_parser(launch, "SGLang", "qwen25, llama3"))
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
    args = SPEC_ALGORITHM.emit(_ALGORITHM[spec.types[0]])
    if launch.draft_model_path is not None:
        args += SPEC_DRAFT_MODEL.emit(launch.draft_model_path)
    if spec.draft_max is not None:
        args += SPEC_STEPS.emit(str(spec.draft_max))
        args += SPEC_DRAFT_TOKENS.emit(str(spec.draft_max + 1))
    return args


# Served like vLLM (an OpenAI server in a container, 30 s to stop, one KV dtype for
# K and V); what differs is named here.
TRAITS = replace(
    vllm.TRAITS,
    kind="sglang",
    argv=argv,
    flags=FLAGS,
    reasoning_field="reasoning_content",  # L-45
    metrics=MetricNames.engine("sglang", "num_running_reqs", "num_queue_reqs"),
    container_program=("python3", "-m", "sglang.launch_server"),
    cache_env={k: v for k, v in vllm.CACHE_ENV.items() if k != "VLLM_CACHE_ROOT"},
    cache_types=frozenset(_KV_DTYPE),
    memory_share=DEFAULT_MEM_FRACTION,
    kv_pool_budget=False,
    info_path="/get_server_info",
    key_env=None,  # --api-key in argv only: it stays on loopback (client.keys)
    default_port=30000,
)
