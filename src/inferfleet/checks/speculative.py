"""Speculative decoding rules (L-12 to L-16): the flags move as a set."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from inferfleet.checks.engine import Hit, Services, Severity, Subject, header_rule, service_rule
from inferfleet.fleetfile.quantities import format_size
from inferfleet.fleetfile.service import Speculative
from inferfleet.gguf import Inspection
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.llamacpp import CONTEXT_BACKED, NEEDS_DRAFT_MODEL

# Flags that configure speculative decoding: llama-server (common/arg.cpp, b11434), vLLM, SGLang.
_SPEC_PREFIXES = ("--spec-", "--draft", "--model-draft", "--device-draft", "--gpu-layers-draft",
                  "--n-gpu-layers-draft", "--cache-type-k-draft", "--cache-type-v-draft",
                  "--threads-draft", "--speculative")  # fmt: skip
_SPEC_SHORT = frozenset({"-md", "-devd", "-ngld", "-ctkd", "-ctvd", "-td", "-tbd", "-hfd"})
SpecRuleFn = Callable[[Subject, Speculative], Iterable[Hit]]


def is_spec_flag(arg: str) -> bool:
    flag = arg.split("=", 1)[0]
    return flag in _SPEC_SHORT or flag.startswith(_SPEC_PREFIXES)


def _mtp_model(s: Subject) -> str | None:
    """The model whose nextn layers draft-mtp uses: the drafter, else the target."""
    spec = s.service.speculative
    if spec is None or "draft-mtp" not in spec.types or s.service.model is None:
        return None
    return spec.draft_model or s.service.model


@header_rule("spec-mtp-without-nextn", "L-12", "error", services="llm", model=_mtp_model)
def mtp_needs_nextn(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """draft-mtp on a file without nextn (MTP) layers fails at load"""
    if facts.nextn_layers == 0:
        yield s.hit(
            "speculative.types",
            f"service {s.name!r} asks for draft-mtp but model {model!r} has no nextn layers "
            f"({facts.architecture}.nextn_predict_layers is absent or 0)",
            "MTP is a property of the file: use a GGUF exported with its MTP head, or "
            "another spec type",
        )


def _spec_rule(
    rule_id: str, lesson: str, severity: Severity, *, services: Services = "llm"
) -> Callable[[SpecRuleFn], SpecRuleFn]:
    """Register a per-service rule over the speculative block of each service that has one."""

    def register(fn: SpecRuleFn) -> SpecRuleFn:
        def judged(s: Subject) -> Iterator[Hit]:
            if s.service.speculative is not None:
                yield from fn(s, s.service.speculative)

        service_rule(rule_id, lesson, severity, services=services, title=fn.__doc__)(judged)
        return fn

    return register


@_spec_rule("spec-draft-without-type", "L-13", "error")
def draft_without_type(s: Subject, spec: Speculative) -> Iterator[Hit]:
    """a draft model or draft settings without a spec type crash the server at load"""
    given = (["draft_model"] if spec.draft_model else []) + spec.draft_params_set
    if given and not spec.types:
        yield s.hit(
            "speculative",
            f"service {s.name!r} sets {', '.join(given)} but no speculative.types",
            "add the spec type (e.g. types: [draft-simple]); a 'no drafting' arm removes "
            "the whole speculative block",
        )


@_spec_rule("spec-type-without-draft", "L-13", "error")
def type_without_draft(s: Subject, spec: Speculative) -> Iterator[Hit]:
    """a draft-* type that loads a drafter file has no draft_model"""
    for spec_type in spec.types:
        if spec_type in NEEDS_DRAFT_MODEL and spec.draft_model is None:
            yield s.hit(
                "speculative.types",
                f"service {s.name!r} uses {spec_type}, which needs speculative.draft_model",
                "name the drafter (a model of this fleet), or use draft-mtp / ngram-*",
            )


@_spec_rule("spec-draft-params-without-drafter", "L-13", "error", services="gguf")
def params_without_drafter(s: Subject, spec: Speculative) -> Iterator[Hit]:
    """draft-* tunables are set but no context-backed drafter uses them"""
    # vLLM and SGLang take draft_max as the n-gram proposer's token count.
    drafted = any(t in CONTEXT_BACKED for t in spec.types)
    if spec.types and spec.draft_params_set and not drafted:
        yield s.hit(
            "speculative",
            f"service {s.name!r} sets {', '.join(spec.draft_params_set)} with only draftless "
            f"types ({', '.join(spec.types)})",
            "remove the draft settings, or add the draft-* type they belong to",
        )


@service_rule("spec-flags-in-extra-args", "L-13", "error")
def flags_in_extra_args(s: Subject) -> Iterator[Hit]:
    """speculative flags in extra_args bypass the set the renderer keeps consistent"""
    for arg in s.extra_args:
        if arg.flag is None or not is_spec_flag(arg.flag):
            continue
        owner = s.traits.flags.field_of(arg.flag)
        yield s.hit(
            f"extra_args[{arg.index}]",
            f"service {s.name!r} passes {arg.flag} in extra_args",
            ("" if owner is None else f"use `services.{s.name}.{owner.field}`: ")
            + "declare drafting under speculative: (types, draft_model, draft_*), so the "
            "flags are emitted together or not at all",
        )


@_spec_rule("spec-one-drafter", "L-14", "error")
def one_drafter(s: Subject, spec: Speculative) -> Iterator[Hit]:
    """at most one context-backed drafter per process; only draftless n-gram types chain"""
    drafters = [t for t in spec.types if t in CONTEXT_BACKED]
    if len(drafters) > 1:
        yield s.hit(
            "speculative.types",
            f"service {s.name!r} chains {len(drafters)} context-backed drafters: "
            f"{', '.join(drafters)}",
            "keep one draft-* type; ngram-* types may be added next to it",
        )


def _drafter_kv(facts: Inspection, ctx_total: int, parallel: int) -> int | None:
    estimate = facts.kv_bytes(ctx_total, parallel=parallel)
    return None if estimate is None else estimate.total_bytes


def _drafter(s: Subject) -> str | None:
    """The drafter model of a service that drafts with one."""
    spec = s.service.speculative
    return spec.draft_model if spec is not None and spec.types else None


@header_rule("spec-drafter-full-window", "L-15", "warning", services="llm", model=_drafter)
def drafter_window(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """a drafter without a sliding window caches the target's whole context"""
    if facts.sliding_window:
        return
    cost = _drafter_kv(facts, s.service.ctx_total, s.service.parallel)
    size = "an unknown amount" if cost is None else format_size(cost)
    yield s.hit(
        "speculative.draft_model",
        f"drafter {model!r} has no sliding window: its KV cache follows the "
        f"target's {s.service.ctx_total} tokens ({size})",
        "budget that memory on the drafter's device, use a drafter with a sliding window, "
        "or lower ctx_per_slot",
    )


@_spec_rule("spec-draft-device-unpinned", "L-16", "error", services="gguf")
def draft_device(s: Subject, spec: Speculative) -> Iterator[Hit]:
    """on a multi-device split the drafter must be pinned to one device"""
    if spec.draft_device is not None or not any(t in CONTEXT_BACKED for t in spec.types):
        return
    devices = gpu_devices(s.service, s.host)
    if len(devices) > 1:
        yield s.hit(
            "speculative",
            f"service {s.name!r} splits over {len(devices)} devices but its drafter has no "
            "draft_device",
            f"set speculative.draft_device to one of: {', '.join(d.name for _, d in devices)}",
        )
