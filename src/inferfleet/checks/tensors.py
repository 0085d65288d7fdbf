"""Tensor override rules (L-17): one list, first match wins, CPU the only safe target.

llama-server splits ``--override-tensor`` on ``,`` and each entry on its
first ``=``, then tries the patterns in order with ``std::regex_search``;
Python's ``re.search`` agrees on the patterns people write for tensor names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inferfleet.checks.engine import Hit, Subject, header_rule, service_rule
from inferfleet.fleetfile.fleet import Service
from inferfleet.gguf import Inspection
from inferfleet.runtimes.base import gpu_devices
from inferfleet.runtimes.llamacpp import ordered_overrides


def _compiled(service: Service) -> list[re.Pattern[str] | None]:
    out: list[re.Pattern[str] | None] = []
    for override in service.tensor_overrides:
        try:
            out.append(re.compile(override.pattern))
        except re.error:
            out.append(None)
    return out


@service_rule("override-pattern-invalid", "L-17", "error")
def pattern_invalid(s: Subject) -> Iterator[Hit]:
    """a tensor override pattern is not a regex the server can take"""
    for index, override in enumerate(s.service.tensor_overrides):
        problem = ""
        if "," in override.pattern or "=" in override.pattern:
            problem = "contains ',' or '=', which the server uses to split the list"
        else:
            try:
                re.compile(override.pattern)
            except re.error as exc:
                problem = f"is not a valid regular expression ({exc})"
        if problem:
            yield s.hit(
                f"tensor_overrides[{index}].pattern",
                f"tensor override {override.pattern!r} of service {s.name!r} {problem}",
                "write ranges as alternations, e.g. blk\\.(4[0-7])\\.ffn_.*_exps",
            )


@service_rule("override-gpu-target-layer-split", "L-17", "error", services="gguf")
def gpu_target(s: Subject) -> Iterator[Hit]:
    """an override to a GPU breaks a layer-split graph; CPU is the only safe target there"""
    if s.service.split_mode not in (None, "layer") or len(gpu_devices(s.service, s.host)) < 2:
        return
    for index, override in enumerate(s.service.tensor_overrides):
        if override.device != "CPU":
            yield s.hit(
                f"tensor_overrides[{index}].device",
                f"service {s.name!r} splits layers over several devices and overrides "
                f"{override.pattern!r} to {override.device}",
                "send overrides to CPU on a layer split, or move whole layers with tensor_split",
            )


def _example(pattern: str) -> str:
    """A tensor name the pattern is written for (used when no header is here)."""
    text = pattern.strip("^$")
    text = re.sub(r"\((?:\?:)?([^|()]*)(?:\|[^()]*)?\)", r"\1", text)  # (a|b) -> a
    text = re.sub(r"\\d[+*]?|\[0-9\][+*]?", "0", text)
    text = re.sub(r"\[(.)[^\]]*\][+*]?", r"\1", text)  # [abc] -> a
    text = re.sub(r"\.[*+]", "x", text)
    return text.replace("\\.", ".").replace("\\", "")


@service_rule("override-shadowed", "L-17", "error", services="gguf")
def shadowed(s: Subject) -> Iterator[Hit]:
    """an earlier override already claims a later one's tensors (first match wins)"""
    service = s.service
    if len(service.tensor_overrides) < 2 or any(p is None for p in _compiled(service)):
        return  # an invalid pattern is reported by override-pattern-invalid
    order = ordered_overrides(service, s.host)
    assert service.model is not None
    facts = s.ctx.header(service.model)
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
                yield s.hit(
                    "tensor_overrides",
                    f"override {pattern}={target} of service {s.name!r} never applies: "
                    f"{first}={first_target} comes first and takes {how}",
                    "put the specific pattern before the broad one (the server tries "
                    "them in order, first match wins)",
                )
                break


def _overridden_model(s: Subject) -> str | None:
    return s.service.model if s.service.tensor_overrides else None


@header_rule("override-matches-no-tensor", "L-17", "error", model=_overridden_model)
def matches_nothing(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """a tensor override pattern matches no tensor in the file (it silently does nothing)"""
    names = [t.name for t in facts.tensors]
    for index, compiled in enumerate(_compiled(s.service)):
        if compiled is not None and not any(compiled.search(n) for n in names):
            pattern = s.service.tensor_overrides[index].pattern
            yield s.hit(
                f"tensor_overrides[{index}].pattern",
                f"tensor override {pattern!r} of service {s.name!r} matches none of the "
                f"{len(names)} tensors of model {model!r}",
                "list the names with `inferfleet gguf inspect FILE --tensors` and fix the pattern",
            )
