"""Tensor override rules (L-17): one list, first match wins, CPU the only safe target.

llama-server splits ``--override-tensor`` on ``,`` and each entry on its
first ``=``, then tries the patterns in order with ``std::regex_search``;
Python's ``re.search`` agrees on the patterns people write for tensor names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inferfleet.budget.placement import layer_slots, split_points
from inferfleet.checks.engine import Hit, Skip, Subject, header_rule, service_rule
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


# Block names a pattern is tried on when the header is not here: the tensors of
# a block that overrides are written for (experts, dense FFN, attention).
_BLOCK_TENSORS = (
    "ffn_up_exps.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight",
    "ffn_up_shexp.weight", "ffn_up.weight", "ffn_down.weight", "attn_q.weight",
    "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_norm.weight",
)  # fmt: skip
# Without a header, a pattern that matches this many leading blocks matches any block.
_ANY_BLOCK = 512
_BLOCK = re.compile(r"^blk\.(\d+)\.")


def _blocks_matched(pattern: re.Pattern[str], names: list[str]) -> set[int]:
    return {int(m.group(1)) for n in names if (m := _BLOCK.match(n)) and pattern.search(n)}


def _guessed_names(count: int) -> list[str]:
    return [f"blk.{i}.{t}" for i in range(count) for t in _BLOCK_TENSORS]


@service_rule("override-gpu-target-layer-split", "L-17", "error", services="gguf")
def gpu_target(s: Subject) -> Iterator[Hit | Skip]:
    """an override sends a block to a GPU that does not own its layer on a layer split"""
    gpus = gpu_devices(s.service, s.host)
    if s.service.split_mode not in (None, "layer") or len(gpus) < 2:
        return
    targeted = [
        (index, o, compiled)
        for index, (o, compiled) in enumerate(
            zip(s.service.tensor_overrides, _compiled(s.service), strict=True)
        )
        if o.device != "CPU" and compiled is not None  # invalid: override-pattern-invalid
    ]
    if not targeted:
        return
    assert s.service.model is not None
    facts = s.ctx.header(s.service.model)
    shares = s.service.tensor_split or [float(d.memory) for _, d in gpus]
    owner: list[int] | None = None
    if isinstance(facts, str):
        names = _guessed_names(_ANY_BLOCK)
    else:
        names = [t.name for t in facts.tensors]
        n_layer = facts.block_count
        if n_layer is not None and sum(shares) > 0:
            owner = layer_slots(n_layer, split_points(shares))
    position = {d.name: p for p, (_, d) in enumerate(gpus)}
    for index, override, compiled in targeted:
        blocks = _blocks_matched(compiled, names)
        target = position.get(override.device)
        if not blocks or target is None:
            continue  # no block tensor (the output layer), or not a device of the split
        if owner is None:
            if len(blocks) < _ANY_BLOCK or not isinstance(facts, str):
                reason = facts if isinstance(facts, str) else "the header has no block count"
                yield Skip(s.name, f"which card owns blocks {_ranges(blocks)}: {reason}", reason)
                continue
            foreign = ["any block the other devices own"]  # it matches every block
        else:
            foreign = [
                f"blk.{b} (owned by {gpus[owner[b]][1].name})"
                for b in sorted(blocks)
                if b < len(owner) and owner[b] != target
            ]
        if foreign:
            shown = ", ".join(foreign[:4]) + (
                f" and {len(foreign) - 4} more" if len(foreign) > 4 else ""
            )
            yield s.hit(
                f"tensor_overrides[{index}].device",
                f"service {s.name!r} splits layers over {len(gpus)} devices and overrides "
                f"{override.pattern!r} to {override.device}, which does not own {shown}: the "
                "cross-device tensors break the layer-split graph",
                "pin a block only to the card that owns its layer (tensor_split decides), "
                "send the rest to CPU, or move whole layers with tensor_split",
            )


def _ranges(blocks: set[int]) -> str:
    ordered = sorted(blocks)
    runs: list[str] = []
    start = prev = ordered[0]
    for b in [*ordered[1:], -1]:
        if b != prev + 1:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = b
        prev = b
    return ",".join(runs)


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
