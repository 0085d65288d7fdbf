"""llama.cpp adapter: a service becomes ``llama-server`` argv, as data.

The argv is a list, never a shell string. Lessons encoded here:

- L-25: ``-c`` is the pool; the per-slot window (the client contract) is
  ``ctx_per_slot``, so the pool is ``ctx_per_slot x parallel``. Unified KV is
  turned off explicitly so each slot really owns its share.
- L-56: ``--metrics`` is on unless the fleet turns it off, so ``/metrics``
  never answers 501 and the endpoint never silently drops out of monitoring.
- L-23: mmap stays on (we never pass ``--no-mmap`` or a ``--load-mode``
  without mmap; the ``mmap-disabled`` rule refuses them, in extra_args or the
  environment, for a model with huge embedding tables).
- L-17: tensor overrides go out as ONE joined list in first-match order, with
  the CPU targets (the broad patterns) last.
- L-13, L-14, L-16: speculative flags are emitted as a set, or not at all.
- L-18, L-19, L-22: ``--jinja`` with tools or template kwargs, an explicit
  chat template file, an explicit ``--mmproj``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from inferfleet.fleetfile.fleet import Host, Service, Speculative
from inferfleet.gguf import Inspection
from inferfleet.runtimes.base import (
    AdapterError,
    Launch,
    MetricNames,
    RuntimeTraits,
    device_index,
    gpu_devices,
    require_ctx,
    vendor_positions,
)
from inferfleet.runtimes.flags import Arg, FieldFlag, FlagTable

# llama.cpp's kv_cache_types (common/arg.cpp): what -ctk / -ctv accept.
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
UNQUANTIZED = frozenset({"f32", "f16", "bf16"})
# Drafters that need a draft context (a second model or the file's MTP head, L-14).
CONTEXT_BACKED = frozenset(
    {"draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark"}
)
# Of those, the ones that load a separate drafter file; draft-mtp may use the target's head.
NEEDS_DRAFT_MODEL = frozenset({"draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark"})

# The flags this adapter emits from service fields, with every spelling llama-server
# (common/arg.cpp, b11434 `--help`) takes for them; in extra_args they are refused.
MODEL = FieldFlag(
    "model", ("--model", "-m", "--model-url", "-mu", "--hf-repo", "-hf", "-hfr", "--hf-file",
              "-hff", "--docker-repo", "-dr"),
)  # fmt: skip
ALIAS = FieldFlag("alias", ("--alias", "-a"))
HOST = FieldFlag("bind", ("--host",))
PORT = FieldFlag("port", ("--port",))
CTX_SIZE = FieldFlag("ctx_per_slot", ("--ctx-size", "-c"))
PARALLEL = FieldFlag("parallel", ("--parallel", "-np"))
# One KV stream per slot, so each slot owns its window (L-25).
NO_KV_UNIFIED = FieldFlag(
    "ctx_per_slot",
    ("--no-kv-unified", "-no-kvu", "--kv-unified", "-kvu"),
    takes_value=False,
)
KV_UNIFIED_PER_SLOT = FieldFlag("ctx_per_slot", ("--kv-unified-per-slot",))
CACHE_TYPE_K = FieldFlag("kv_cache.k", ("--cache-type-k", "-ctk"))
CACHE_TYPE_V = FieldFlag("kv_cache.v", ("--cache-type-v", "-ctv"))
FLASH_ATTN = FieldFlag("flash_attn", ("--flash-attn", "-fa"))
METRICS = FieldFlag("metrics", ("--metrics",), takes_value=False)
DEVICE = FieldFlag("devices", ("--device", "-dev"))
GPU_LAYERS = FieldFlag("devices", ("--n-gpu-layers", "-ngl", "--gpu-layers"))
SPLIT_MODE = FieldFlag("split_mode", ("--split-mode", "-sm"))
TENSOR_SPLIT = FieldFlag("tensor_split", ("--tensor-split", "-ts"))
OVERRIDE_TENSOR = FieldFlag("tensor_overrides", ("--override-tensor", "-ot"))
# Shorthands that add overrides of their own (exps=CPU), outside the one ordered list (L-17).
CPU_MOE = FieldFlag("tensor_overrides", ("--cpu-moe", "-cmoe"), takes_value=False)
N_CPU_MOE = FieldFlag("tensor_overrides", ("--n-cpu-moe", "-ncmoe"))
MMPROJ = FieldFlag("mmproj", ("--mmproj", "-mm", "--mmproj-url", "-mmu"))
NO_MMPROJ = FieldFlag(
    "mmproj", ("--no-mmproj", "--mmproj-auto", "--no-mmproj-auto"), takes_value=False
)
JINJA = FieldFlag("jinja", ("--jinja", "--no-jinja"), takes_value=False)
CHAT_TEMPLATE_FILE = FieldFlag("chat_template_file", ("--chat-template-file", "--chat-template"))
CHAT_TEMPLATE_KWARGS = FieldFlag("chat_template_kwargs", ("--chat-template-kwargs",))
API_KEY = FieldFlag("secrets_env", ("--api-key", "--api-key-file"))
# Cross-origin access (L-58): llama-server's default echoes any Origin with credentials
# allowed, so a web page in a browser that reaches the port could drive the server. Every
# server says an origin no browser page has (only its own pages, which need no CORS).
CORS_ORIGINS = FieldFlag("exposure", ("--cors-origins",))
CORS_CREDENTIALS = FieldFlag(
    "exposure", ("--no-cors-credentials", "--cors-credentials"), takes_value=False
)
# A browser's Origin is scheme://host[:port] or "null"; "none" equals none of them.
CORS_CLOSED = "none"
# Router mode (a swap group, runtimes/llamacpp_router.py): in a single service's
# extra_args they would turn it into a router with management routes.
MODELS_PRESET = FieldFlag("group", ("--models-preset", "--models-dir"))
MODELS_MAX = FieldFlag("group", ("--models-max",))
MODELS_AUTOLOAD = FieldFlag(
    "group", ("--models-autoload", "--no-models-autoload"), takes_value=False
)
SPEC_TYPE = FieldFlag("speculative.types", ("--spec-type",))
SPEC_DRAFT_MODEL = FieldFlag(
    "speculative.draft_model", ("--spec-draft-model", "-md", "--model-draft")
)
SPEC_DRAFT_DEVICE = FieldFlag(
    "speculative.draft_device", ("--spec-draft-device", "-devd", "--device-draft")
)
SPEC_DRAFT_MAX = FieldFlag(
    "speculative.draft_max", ("--spec-draft-n-max", "--draft", "--draft-n", "--draft-max")
)
SPEC_DRAFT_MIN = FieldFlag(
    "speculative.draft_min", ("--spec-draft-n-min", "--draft-min", "--draft-n-min")
)
SPEC_DRAFT_P_MIN = FieldFlag("speculative.draft_p_min", ("--spec-draft-p-min", "--draft-p-min"))
SPEC_DRAFT_TYPE_K = FieldFlag(
    "speculative.draft_kv_cache.k", ("--spec-draft-type-k", "-ctkd", "--cache-type-k-draft")
)
SPEC_DRAFT_TYPE_V = FieldFlag(
    "speculative.draft_kv_cache.v", ("--spec-draft-type-v", "-ctvd", "--cache-type-v-draft")
)
FLAGS = FlagTable(
    program="llama-server",
    fields=(
        MODEL, ALIAS, HOST, PORT, CTX_SIZE, PARALLEL, NO_KV_UNIFIED, KV_UNIFIED_PER_SLOT,
        CACHE_TYPE_K, CACHE_TYPE_V,
        FLASH_ATTN, METRICS, DEVICE, GPU_LAYERS, SPLIT_MODE, TENSOR_SPLIT, OVERRIDE_TENSOR,
        CPU_MOE, N_CPU_MOE, MMPROJ, NO_MMPROJ, JINJA, CHAT_TEMPLATE_FILE, CHAT_TEMPLATE_KWARGS,
        API_KEY, CORS_ORIGINS, CORS_CREDENTIALS, MODELS_PRESET, MODELS_MAX, MODELS_AUTOLOAD,
        SPEC_TYPE, SPEC_DRAFT_MODEL, SPEC_DRAFT_DEVICE, SPEC_DRAFT_MAX, SPEC_DRAFT_MIN,
        SPEC_DRAFT_P_MIN, SPEC_DRAFT_TYPE_K, SPEC_DRAFT_TYPE_V,
    ),
    inline_values=False,  # llama-server refuses --ctx-size=4096: "invalid argument"
)  # fmt: skip

# How a llama-server loses mmap (L-23): the flag older builds take, the load
# modes of newer ones (b11434 `--load-mode`: auto, none, mmap, mlock,
# mmap+mlock, dio) that read the weights into anonymous memory, and the
# environment variables it reads the same settings from.
NO_MMAP_FLAGS = frozenset({"--no-mmap"})
# The tensors that stay in host memory whatever the offload (the input layer), and the
# size from which they are "huge" (L-23): Gemma 3 27B's token_embd or Gemma 3n's
# per-layer embeddings are 1-4 GiB, read into anonymous memory by a load without mmap.
EMBEDDING_TABLES = frozenset({"token_embd.weight", "per_layer_token_embd.weight"})
HUGE_EMBEDDING = 1 << 30
LOAD_MODE_FLAGS = frozenset({"--load-mode", "-lm"})
LOAD_MODES_WITHOUT_MMAP = frozenset({"none", "mlock", "dio"})
_FALSE = frozenset({"0", "false", "off", "no", "disabled"})


def mmap_disabled(args: Iterable[Arg], env: Mapping[str, str]) -> str | None:
    """What in a parsed argv or the server's environment turns mmap off, or None (L-23)."""
    for arg in args:
        if arg.flag in NO_MMAP_FLAGS:
            return arg.text
        if arg.flag in LOAD_MODE_FLAGS and (arg.value or "").lower() in LOAD_MODES_WITHOUT_MMAP:
            return f"{arg.flag} {arg.value}"
    mode = env.get("LLAMA_ARG_LOAD_MODE", "").lower()
    if mode in LOAD_MODES_WITHOUT_MMAP:
        return f"LLAMA_ARG_LOAD_MODE={mode}"
    if env.get("LLAMA_ARG_NO_MMAP", "").lower() not in ("", *_FALSE):
        return f"LLAMA_ARG_NO_MMAP={env['LLAMA_ARG_NO_MMAP']}"
    if env.get("LLAMA_ARG_MMAP", "").lower() in _FALSE:
        return f"LLAMA_ARG_MMAP={env['LLAMA_ARG_MMAP']}"
    return None


def embedding_bytes(facts: Inspection) -> int:
    """Bytes of the model's embedding tables, from its GGUF header (L-23)."""
    return sum(t.n_bytes or 0 for t in facts.tensors if t.name in EMBEDDING_TABLES)


# llama.cpp names its devices (and their buffer types) after the backend that drives them.
_DEVICE_PREFIX = {"nvidia": "CUDA", "amd": "ROCm", "intel": "SYCL"}


def device_name(host: Host, name: str) -> str:
    """llama.cpp's name of a host device (``CUDA0``), or ``CPU``."""
    found = vendor_positions(host).get(name)
    if found is not None:
        position, device = found
        return f"{_DEVICE_PREFIX[device.vendor]}{device_index(position, device)}"
    if name == "CPU" or any(d.name == name and d.vendor == "cpu" for d in host.devices):
        return "CPU"
    raise AdapterError(
        f"{name!r} is not a device of this host",
        hint=f"known devices: {', '.join(d.name for d in host.devices) or '(none)'}",
    )


def argv(launch: Launch) -> list[str]:
    """The full ``llama-server`` command line for a resolved launch."""
    service = launch.service
    require_ctx(launch)
    args = [
        *launch.program,
        *MODEL.emit(launch.model_path),
        *ALIAS.emit(launch.alias),
        *HOST.emit(launch.listen_host),
        *PORT.emit(str(launch.listen_port)),
        *CTX_SIZE.emit(str(service.ctx_total)),  # the pool: per slot x slots (L-25)
        *PARALLEL.emit(str(service.parallel)),
        *NO_KV_UNIFIED.emit(),
        *CACHE_TYPE_K.emit(service.kv_cache.k),
        *CACHE_TYPE_V.emit(service.kv_cache.v),
        *FLASH_ATTN.emit(service.flash_attn),
        *CORS_ORIGINS.emit(CORS_CLOSED),
        *CORS_CREDENTIALS.emit(),
    ]
    if service.metrics_on:
        args += METRICS.emit()
    if launch.rpc_args:
        args += launch.rpc_args
    else:
        args += _device_args(service, launch.host)
        args += _split_args(service)
    args += _override_args(service, launch.host)
    if service.mmproj is not None:
        if launch.mmproj_path is None:
            raise _unresolved(launch, "mmproj", "the projector file's path")
        args += MMPROJ.emit(launch.mmproj_path)
    args += _template_args(launch)
    if service.speculative is not None:
        args += _speculative_args(launch, service.speculative)
    args += service.extra_args
    return args


def _device_args(service: Service, host: Host) -> list[str]:
    if not service.devices:
        return []
    gpus = [
        f"{_DEVICE_PREFIX[d.vendor]}{device_index(i, d)}" for i, d in gpu_devices(service, host)
    ]
    if not gpus:
        # CPU only: keep every layer off any accelerator the build may have.
        return [*DEVICE.emit("none"), *GPU_LAYERS.emit("0")]
    return [*DEVICE.emit(",".join(gpus)), *GPU_LAYERS.emit("999")]


def _split_args(service: Service) -> list[str]:
    args: list[str] = []
    if service.split_mode is not None:
        args += SPLIT_MODE.emit(service.split_mode)
    if service.tensor_split:
        args += TENSOR_SPLIT.emit(",".join(f"{share:g}" for share in service.tensor_split))
    return args


def ordered_overrides(service: Service, host: Host) -> list[tuple[str, str]]:
    """(pattern, llama.cpp target) in the order the server will try them (L-17).

    First match wins, so the device-specific placements go first and the
    broad CPU patterns (``exps=CPU``) last; the fleet's order is kept within
    each group.
    """
    targeted = [(o.pattern, device_name(host, o.device)) for o in service.tensor_overrides]
    return [t for t in targeted if t[1] != "CPU"] + [t for t in targeted if t[1] == "CPU"]


def _override_args(service: Service, host: Host) -> list[str]:
    pairs = ordered_overrides(service, host)
    if not pairs:
        return []
    return OVERRIDE_TENSOR.emit(",".join(f"{pattern}={target}" for pattern, target in pairs))


def wants_jinja(service: Service) -> bool | None:
    """True/False for an explicit --jinja/--no-jinja, None to leave the default (L-18)."""
    if service.jinja is not None:
        return service.jinja
    if service.client.tools or service.chat_template_kwargs:
        return True
    return None


def _template_args(launch: Launch) -> list[str]:
    service = launch.service
    args: list[str] = []
    jinja = wants_jinja(service)
    if jinja is True:
        args.append(JINJA.spellings[0])
    elif jinja is False:
        args.append(JINJA.spellings[1])
    if service.chat_template_file is not None:
        if launch.chat_template_path is None:
            raise _unresolved(launch, "chat_template_file", "the template file's path")
        args += CHAT_TEMPLATE_FILE.emit(launch.chat_template_path)
    if service.chat_template_kwargs:
        text = json.dumps(service.chat_template_kwargs, sort_keys=True, separators=(",", ":"))
        args += CHAT_TEMPLATE_KWARGS.emit(text)
    return args


def _speculative_args(launch: Launch, spec: Speculative) -> list[str]:
    """The speculative flags as one consistent set (L-13, L-14, L-16)."""
    name = launch.service_name
    if not spec.types:
        if spec.draft_model is not None or spec.draft_params_set:
            raise AdapterError(
                f"service {name!r}: speculative settings without a spec type (L-13)",
                hint="add speculative.types (e.g. [draft-simple]) or remove the block",
            )
        return []
    drafters = [t for t in spec.types if t in CONTEXT_BACKED]
    if len(drafters) > 1:
        raise AdapterError(
            f"service {name!r}: more than one context-backed drafter: {', '.join(drafters)}",
            hint="keep one draft-* type; draftless ngram-* types may be chained (L-14)",
        )
    needs_model = [t for t in spec.types if t in NEEDS_DRAFT_MODEL]
    if needs_model and spec.draft_model is None:
        raise AdapterError(
            f"service {name!r}: {needs_model[0]} needs speculative.draft_model (L-13)",
            hint="name the drafter model, or use draft-mtp / an ngram-* type",
        )
    if not drafters and spec.draft_params_set:
        raise AdapterError(
            f"service {name!r}: draft settings ({', '.join(spec.draft_params_set)}) without a "
            "drafter (L-13)",
            hint="remove them, or add a draft-* spec type",
        )
    args = SPEC_TYPE.emit(",".join(spec.types))
    if spec.draft_model is not None:
        if launch.draft_model_path is None:
            raise _unresolved(launch, "speculative.draft_model", "the drafter's file")
        args += SPEC_DRAFT_MODEL.emit(launch.draft_model_path)
    if spec.draft_device is not None:
        args += SPEC_DRAFT_DEVICE.emit(device_name(launch.host, spec.draft_device))
    if spec.draft_max is not None:
        args += SPEC_DRAFT_MAX.emit(str(spec.draft_max))
    if spec.draft_min is not None:
        args += SPEC_DRAFT_MIN.emit(str(spec.draft_min))
    if spec.draft_p_min is not None:
        args += SPEC_DRAFT_P_MIN.emit(f"{spec.draft_p_min:g}")
    if spec.draft_kv_cache is not None:
        args += SPEC_DRAFT_TYPE_K.emit(spec.draft_kv_cache.k)
        args += SPEC_DRAFT_TYPE_V.emit(spec.draft_kv_cache.v)
    return args


def _unresolved(launch: Launch, field: str, what: str) -> AdapterError:
    return AdapterError(
        f"service {launch.service_name!r} sets {field} but {what} was not resolved",
        hint="render the service through inferfleet.render, which resolves every path",
    )


TRAITS = RuntimeTraits(
    kind="llama.cpp",
    argv=argv,
    flags=FLAGS,
    reasoning_field="reasoning_content",  # L-45
    metrics=MetricNames.engine(
        "llamacpp",
        "requests_processing",
        "requests_deferred",
        generation_tokens="tokens_predicted_total",
    ),
    stop_grace_s=10.0,
    # The official server images put the binary here (ghcr.io/ggml-org/llama.cpp:server).
    container_program=("/app/llama-server",),
    cache_env={"XDG_CACHE_HOME": "/cache/xdg"},
    cache_types=frozenset(CACHE_TYPES),
    asymmetric_kv=True,
    gguf=True,
    slots_endpoint=True,
    pinned_build=True,
    key_env="LLAMA_API_KEY",  # b11434 --help: "(env: LLAMA_API_KEY)"
)
