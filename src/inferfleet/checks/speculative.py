"""Speculative decoding rules (L-12 to L-16): the flags move as a set."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.fleetfile.quantities import format_size
from inferfleet.gguf import Inspection
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.llamacpp import CONTEXT_BACKED, NEEDS_DRAFT_MODEL
from inferfleet.runtimes.registry import traits

# Flags that configure speculative decoding: llama-server (common/arg.cpp, b11434), vLLM, SGLang.
_SPEC_PREFIXES = ("--spec-", "--draft", "--model-draft", "--device-draft", "--gpu-layers-draft",
                  "--n-gpu-layers-draft", "--cache-type-k-draft", "--cache-type-v-draft",
                  "--threads-draft", "--speculative")  # fmt: skip
_SPEC_SHORT = frozenset({"-md", "-devd", "-ngld", "-ctkd", "-ctvd", "-td", "-tbd", "-hfd"})


def is_spec_flag(arg: str) -> bool:
    flag = arg.split("=", 1)[0]
    return flag in _SPEC_SHORT or flag.startswith(_SPEC_PREFIXES)


@rule(
    "spec-mtp-without-nextn",
    "L-12",
    "error",
    "draft-mtp on a file without nextn (MTP) layers fails at load",
    header=True,
)
def mtp_needs_nextn(ctx: CheckContext) -> Iterator[Hit | Skip]:
    for name, service, _ in ctx.llm():
        spec = service.speculative
        if spec is None or "draft-mtp" not in spec.types or service.model is None:
            continue
        model = spec.draft_model or service.model
        facts = ctx.header(model)
        if isinstance(facts, str):
            yield Skip(name, facts)
        elif facts.nextn_layers == 0:
            yield Hit(
                name,
                f"services.{name}.speculative.types",
                f"service {name!r} asks for draft-mtp but model {model!r} has no nextn layers "
                f"({facts.architecture}.nextn_predict_layers is absent or 0)",
                "MTP is a property of the file: use a GGUF exported with its MTP head, or "
                "another spec type",
            )


@rule(
    "spec-draft-without-type",
    "L-13",
    "error",
    "a draft model or draft settings without a spec type crash the server at load",
)
def draft_without_type(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        spec = service.speculative
        if spec is None or spec.types:
            continue
        given = (["draft_model"] if spec.draft_model else []) + spec.draft_params_set
        if given:
            yield Hit(
                name,
                f"services.{name}.speculative",
                f"service {name!r} sets {', '.join(given)} but no speculative.types",
                "add the spec type (e.g. types: [draft-simple]); a 'no drafting' arm removes "
                "the whole speculative block",
            )


@rule(
    "spec-type-without-draft",
    "L-13",
    "error",
    "a draft-* type that loads a drafter file has no draft_model",
)
def type_without_draft(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        spec = service.speculative
        if spec is None or spec.draft_model is not None:
            continue
        for spec_type in spec.types:
            if spec_type in NEEDS_DRAFT_MODEL:
                yield Hit(
                    name,
                    f"services.{name}.speculative.types",
                    f"service {name!r} uses {spec_type}, which needs speculative.draft_model",
                    "name the drafter (a model of this fleet), or use draft-mtp / ngram-*",
                )


@rule(
    "spec-draft-params-without-drafter",
    "L-13",
    "error",
    "draft-* tunables are set but no context-backed drafter uses them",
)
def params_without_drafter(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        spec = service.speculative
        # vLLM and SGLang take draft_max as the n-gram proposer's token count.
        if not traits(runtime.kind).gguf:
            continue
        if spec is None or not spec.types or not spec.draft_params_set:
            continue
        if not any(t in CONTEXT_BACKED for t in spec.types):
            yield Hit(
                name,
                f"services.{name}.speculative",
                f"service {name!r} sets {', '.join(spec.draft_params_set)} with only draftless "
                f"types ({', '.join(spec.types)})",
                "remove the draft settings, or add the draft-* type they belong to",
            )


@rule(
    "spec-flags-in-extra-args",
    "L-13",
    "error",
    "speculative flags in extra_args bypass the set the renderer keeps consistent",
)
def flags_in_extra_args(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        for index, arg in enumerate(service.extra_args):
            if is_spec_flag(arg):
                yield Hit(
                    name,
                    f"services.{name}.extra_args[{index}]",
                    f"service {name!r} passes {arg.split('=', 1)[0]} in extra_args",
                    "declare drafting under speculative: (types, draft_model, draft_*), so the "
                    "flags are emitted together or not at all",
                )


@rule(
    "spec-one-drafter",
    "L-14",
    "error",
    "at most one context-backed drafter per process; only draftless n-gram types chain",
)
def one_drafter(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        spec = service.speculative
        drafters = [] if spec is None else [t for t in spec.types if t in CONTEXT_BACKED]
        if len(drafters) > 1:
            yield Hit(
                name,
                f"services.{name}.speculative.types",
                f"service {name!r} chains {len(drafters)} context-backed drafters: "
                f"{', '.join(drafters)}",
                "keep one draft-* type; ngram-* types may be added next to it",
            )


def _drafter_kv(facts: Inspection, ctx_total: int, parallel: int) -> int | None:
    estimate = facts.kv_bytes(ctx_total, parallel=parallel)
    return None if estimate is None else estimate.total_bytes


@rule(
    "spec-drafter-full-window",
    "L-15",
    "warning",
    "a drafter without a sliding window caches the target's whole context",
    header=True,
)
def drafter_window(ctx: CheckContext) -> Iterator[Hit | Skip]:
    for name, service, _ in ctx.llm():
        spec = service.speculative
        if spec is None or spec.draft_model is None or not spec.types:
            continue
        facts = ctx.header(spec.draft_model)
        if isinstance(facts, str):
            yield Skip(name, facts)
            continue
        if facts.sliding_window:
            continue
        cost = _drafter_kv(facts, service.ctx_total, service.parallel)
        size = "an unknown amount" if cost is None else format_size(cost)
        yield Hit(
            name,
            f"services.{name}.speculative.draft_model",
            f"drafter {spec.draft_model!r} has no sliding window: its KV cache follows the "
            f"target's {service.ctx_total} tokens ({size})",
            "budget that memory on the drafter's device, use a drafter with a sliding window, "
            "or lower ctx_per_slot",
        )


@rule(
    "spec-draft-device-unpinned",
    "L-16",
    "error",
    "on a multi-device split the drafter must be pinned to one device",
)
def draft_device(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        spec = service.speculative
        if not traits(runtime.kind).gguf or spec is None or spec.draft_device is not None:
            continue
        if not any(t in CONTEXT_BACKED for t in spec.types):
            continue
        devices = gpu_devices(service, ctx.fleet.hosts[service.host])
        if len(devices) > 1:
            yield Hit(
                name,
                f"services.{name}.speculative",
                f"service {name!r} splits over {len(devices)} devices but its drafter has no "
                "draft_device",
                f"set speculative.draft_device to one of: {', '.join(d.name for _, d in devices)}",
            )
