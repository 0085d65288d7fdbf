"""vLLM adapter: a service becomes ``vllm serve`` argv, as data (or, for a runtime pinned
as a Python package, its venv's ``python -m vllm.entrypoints.openai.api_server``).

A ``binary:`` runtime runs what its name says (runtimes.pinned.BINARY_ENTRY): a Python
interpreter (``/opt/venv/bin/python``) gets ``-m vllm.entrypoints.openai.api_server
--model MODEL``, any other binary is the ``vllm`` console script and gets ``serve MODEL``.

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
from dataclasses import dataclass, replace
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
from inferfleet.runtimes.flags import FieldFlag, FlagTable
from inferfleet.runtimes.pinned import VENV_ENTRY

DEFAULT_GPU_MEMORY_UTILIZATION = 0.90
# L-32: 1.0 killed endpoints under load; 0.98 worked, and an operator ran 0.982,
# measured, on a 32 GiB card. The adapter refuses only what L-32 forbids (1.0);
# above this margin `check` warns with the arithmetic (gpu-memory-utilization-cap).
SHARE_MARGIN = 0.98
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


# The flags argv emits from service fields (vLLM's `vllm serve --help`); vLLM also
# reads every long flag with underscores (--max_model_len), see FLAGS.underscores.
MODEL = FieldFlag("model", ("--model",))  # the positional model path, or this
SERVED_NAME = FieldFlag("alias", ("--served-model-name",))
HOST = FieldFlag("bind", ("--host",))
PORT = FieldFlag("port", ("--port",))
MAX_MODEL_LEN = FieldFlag("ctx_per_slot", ("--max-model-len",))
MAX_NUM_SEQS = FieldFlag("parallel", ("--max-num-seqs",))
GPU_MEMORY = FieldFlag("gpu_memory_utilization", ("--gpu-memory-utilization",))
KV_CACHE_DTYPE = FieldFlag("kv_cache", ("--kv-cache-dtype",))
TENSOR_PARALLEL = FieldFlag("tensor_parallel", ("--tensor-parallel-size", "-tp"))
REASONING_PARSER = FieldFlag("reasoning_parser", ("--reasoning-parser",))
AUTO_TOOL_CHOICE = FieldFlag(
    "client.tools", ("--enable-auto-tool-choice", "--no-enable-auto-tool-choice"), False
)
TOOL_PARSER = FieldFlag("tool_parser", ("--tool-call-parser",))
CHAT_TEMPLATE = FieldFlag("chat_template_file", ("--chat-template",))
TEMPLATE_KWARGS = FieldFlag("chat_template_kwargs", ("--default-chat-template-kwargs",))
SPECULATIVE = FieldFlag("speculative", ("--speculative-config",))
API_KEY = FieldFlag("secrets_env", ("--api-key",))
# Cross-origin access (L-58): an empty list answers no browser page; older images
# default to "*". Credentials stay off (every version's default); both are fleet-owned.
CORS_ORIGINS = FieldFlag("exposure", ("--allowed-origins",))
CORS_CREDENTIALS = FieldFlag(
    "exposure", ("--allow-credentials", "--no-allow-credentials"), takes_value=False
)
NO_ORIGINS = "[]"  # read with json.loads (vllm/entrypoints/launchers/cli_args.py)
FLAGS = FlagTable(
    program="vllm serve",
    fields=(
        MODEL, SERVED_NAME, HOST, PORT, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY, KV_CACHE_DTYPE,
        TENSOR_PARALLEL, REASONING_PARSER, AUTO_TOOL_CHOICE, TOOL_PARSER, CHAT_TEMPLATE,
        TEMPLATE_KWARGS, SPECULATIVE, API_KEY, CORS_ORIGINS, CORS_CREDENTIALS,
    ),
    inline_values=True,
    underscores=True,
)  # fmt: skip


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
    return CHAT_TEMPLATE.emit(launch.chat_template_path)


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


def memory_share(launch: Launch, default: float, flag: str) -> str:
    """The memory share to pass: the fleet's or ``default``; 1.0 is refused (L-32)."""
    value = launch.service.gpu_memory_utilization
    share = default if value is None else value
    if share >= 1.0:
        raise AdapterError(
            f"service {launch.service_name!r}: {flag} {share:g} takes the whole device (L-32)",
            hint="stay below 1.0 (0.98 and 0.982 were measured to work); at 1.0 the "
            "endpoint was killed under load",
        )
    return f"{share:g}"


@dataclass(frozen=True)
class Server:
    """One engine of the vLLM family (vLLM, SGLang): the same settings, its own flags."""

    engine: str  # in messages: "vLLM"
    flags: FlagTable  # the flags of the settings, found by their service field
    default_share: float  # the memory share when the fleet gives none (L-32)
    kv_dtypes: dict[str, str]  # the fleet's cache types, as the engine names them (L-21)


def server_args(launch: Launch, server: Server, model: list[str]) -> list[str]:
    """The head of a vLLM or SGLang command line (program, ``model``'s words, name, address,
    window, slots, memory share, KV dtype, tensor parallel); what neither takes is refused."""
    service, flag = launch.service, server.flags.of
    refuse_mmproj(launch, server.engine)
    share = memory_share(launch, server.default_share, "gpu_memory_utilization")
    return [
        *launch.program,
        *model,
        *flag("alias").emit(launch.alias),
        *flag("bind").emit(launch.listen_host),
        *flag("port").emit(str(launch.listen_port)),
        *flag("ctx_per_slot").emit(str(require_ctx(launch))),
        *flag("parallel").emit(str(service.parallel)),
        *flag("gpu_memory_utilization").emit(share),
        *flag("kv_cache").emit(
            kv_cache_dtype(server.engine, launch.service_name, service.kv_cache, server.kv_dtypes)
        ),
        *flag("tensor_parallel").emit(str(tensor_parallel(launch))),
    ]


SERVER = Server("vLLM", FLAGS, DEFAULT_GPU_MEMORY_UTILIZATION, _KV_DTYPE)


def argv(launch: Launch) -> list[str]:
    service = launch.service
    args = [*server_args(launch, SERVER, _model_args(launch)), *CORS_ORIGINS.emit(NO_ORIGINS)]
    if service.reasoning_parser is not None:
        args += REASONING_PARSER.emit(service.reasoning_parser)
    if service.client.tools:
        parser = tool_parser(launch, "vLLM", "hermes, qwen3_coder")
        args += [*AUTO_TOOL_CHOICE.emit(), *TOOL_PARSER.emit(parser)]
    args += chat_template_args(launch)
    if service.chat_template_kwargs:
        text = json.dumps(service.chat_template_kwargs, sort_keys=True, separators=(",", ":"))
        args += TEMPLATE_KWARGS.emit(text)
    if service.speculative is not None and service.speculative.types:
        config = _speculative_config(launch)
        args += SPECULATIVE.emit(json.dumps(config, sort_keys=True, separators=(",", ":")))
    args += service.extra_args
    return args


def _model_args(launch: Launch) -> list[str]:
    """``vllm serve`` takes the model as its first argument; the API server module (what a
    pinned venv or a Python binary runs, see runtimes.pinned) takes ``--model``."""
    if tuple(launch.program[-2:]) == VENV_ENTRY["vllm"]:
        return MODEL.emit(launch.model_path)
    return [launch.model_path]


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
    flags=FLAGS,
    reasoning_field="reasoning",  # L-45
    metrics=replace(
        MetricNames.engine("vllm", "num_requests_running", "num_requests_waiting"),
        draft_tokens="vllm:spec_decode_num_draft_tokens_total",
        accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    ),
    stop_grace_s=30.0,
    container_program=("vllm", "serve"),
    cache_env=CACHE_ENV,
    cache_types=frozenset(_KV_DTYPE),
    asymmetric_kv=False,
    memory_share=DEFAULT_GPU_MEMORY_UTILIZATION,
    kv_pool_budget=True,
    info_path="/version",
    key_env="VLLM_API_KEY",  # guards its /v1 routes when --api-key is not given
    default_port=8000,
)
