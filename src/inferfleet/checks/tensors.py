"""Tensor override rules (L-17): one list, first match wins, CPU the only safe target.

llama-server splits ``--override-tensor`` on ``,`` and each entry on its
first ``=``, then tries the patterns in order with ``std::regex_search``;
Python's ``re.search`` agrees on the patterns people write for tensor names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.fleetfile.fleet import Service
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.llamacpp import ordered_overrides
from inferfleet.runtimes.registry import traits


def _compiled(service: Service) -> list[re.Pattern[str] | None]:
    out: list[re.Pattern[str] | None] = []
    for override in service.tensor_overrides:
        try:
            out.append(re.compile(override.pattern))
        except re.error:
            out.append(None)
    return out


@rule(
    "override-pattern-invalid",
    "L-17",
    "error",
    "a tensor override pattern is not a regex the server can take",
)
def pattern_invalid(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        for index, override in enumerate(service.tensor_overrides):
            field = f"services.{name}.tensor_overrides[{index}].pattern"
            problem = ""
            if "," in override.pattern or "=" in override.pattern:
                problem = "contains ',' or '=', which the server uses to split the list"
            else:
                try:
                    re.compile(override.pattern)
                except re.error as exc:
                    problem = f"is not a valid regular expression ({exc})"
            if problem:
                yield Hit(
                    name,
                    field,
                    f"tensor override {override.pattern!r} of service {name!r} {problem}",
                    "write ranges as alternations, e.g. blk\\.(4[0-7])\\.ffn_.*_exps",
                )


@rule(
    "override-gpu-target-layer-split",
    "L-17",
    "error",
    "an override to a GPU breaks a layer-split graph; CPU is the only safe target there",
)
def gpu_target(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or service.split_mode not in (None, "layer"):
            continue
        if len(gpu_devices(service, ctx.fleet.hosts[service.host])) < 2:
            continue
        for index, override in enumerate(service.tensor_overrides):
            if override.device != "CPU":
                yield Hit(
                    name,
                    f"services.{name}.tensor_overrides[{index}].device",
                    f"service {name!r} splits layers over several devices and overrides "
                    f"{override.pattern!r} to {override.device}",
                    "send overrides to CPU on a layer split, or move whole layers with "
                    "tensor_split",
                )


def _example(pattern: str) -> str:
    """A tensor name the pattern is written for (used when no header is here)."""
    text = pattern.strip("^$")
    text = re.sub(r"\((?:\?:)?([^|()]*)(?:\|[^()]*)?\)", r"\1", text)  # (a|b) -> a
    text = re.sub(r"\\d[+*]?|\[0-9\][+*]?", "0", text)
    text = re.sub(r"\[(.)[^\]]*\][+*]?", r"\1", text)  # [abc] -> a
    text = re.sub(r"\.[*+]", "x", text)
    return text.replace("\\.", ".").replace("\\", "")


@rule(
    "override-shadowed",
    "L-17",
    "error",
    "an earlier override already claims a later one's tensors (first match wins)",
)
def shadowed(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or len(service.tensor_overrides) < 2:
            continue
        if any(p is None for p in _compiled(service)):
            continue  # reported by override-pattern-invalid
        order = ordered_overrides(service, ctx.fleet.hosts[service.host])
        assert service.model is not None
        facts = ctx.header(service.model)
        names = None if isinstance(facts, str) else [t.name for t in facts.tensors]
        for later, (pattern, target) in enumerate(order):
            for first, first_target in order[:later]:
                if first_target == target:
                    continue
                if names is not None:
                    mine = [n for n in names if re.search(pattern, n)]
                    hit = bool(mine) and all(re.search(first, n) for n in mine)
                else:
                    sample = _example(pattern)
                    hit = bool(re.search(pattern, sample) and re.search(first, sample))
                if hit:
                    how = "every tensor it matches" if names is not None else "its tensors"
                    yield Hit(
                        name,
                        f"services.{name}.tensor_overrides",
                        f"override {pattern}={target} of service {name!r} never applies: "
                        f"{first}={first_target} comes first and takes {how}",
                        "put the specific pattern before the broad one (the server tries "
                        "them in order, first match wins)",
                    )
                    break


@rule(
    "override-matches-no-tensor",
    "L-17",
    "error",
    "a tensor override pattern matches no tensor in the file (it silently does nothing)",
    header=True,
)
def matches_nothing(ctx: CheckContext) -> Iterator[Hit | Skip]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or not service.tensor_overrides or service.model is None:
            continue
        facts = ctx.header(service.model)
        if isinstance(facts, str):
            yield Skip(name, facts)
            continue
        names = [t.name for t in facts.tensors]
        for index, compiled in enumerate(_compiled(service)):
            if compiled is not None and not any(compiled.search(n) for n in names):
                pattern = service.tensor_overrides[index].pattern
                yield Hit(
                    name,
                    f"services.{name}.tensor_overrides[{index}].pattern",
                    f"tensor override {pattern!r} of service {name!r} matches none of the "
                    f"{len(names)} tensors of model {service.model!r}",
                    "list the names with `inferfleet gguf inspect FILE --tensors` and fix "
                    "the pattern",
                )
