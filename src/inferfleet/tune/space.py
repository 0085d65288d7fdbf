"""What `tune` searches: the knobs of a service, their values, and a candidate as a service.

A knob is either a key of the service in the fleet file (``flash_attn``,
``kv_cache``, ``speculative.draft_max``, ``ctx_per_slot``) or a server flag
kept in its ``extra_args`` (``-t``, ``-ub``). A candidate is one value per
knob; applying it gives the ``set`` a bench arm merges into the service, so
a candidate runs the service's own argv through the one launch pipeline,
and ``--write`` edits exactly those keys.

The default space comes from the runtime and the host: on a CPU, the thread
counts; for llama.cpp, the micro-batch and flash attention; a declared
drafter's draft length (a space file can list other drafters, ``draft_model``);
for vLLM, the batched-token budget, the sequences run at once and chunked
prefill. KV cache types stay as declared unless the model's quality policy
(``kv_cache_allowed``) or a space file lists pairs: quantising the cache
changes what the model answers, not only its speed.
A space file (``--space``) narrows or widens it::

    knobs:
      threads: [1, 2]
      ubatch: [128, 512]
      flash_attn: [on, off]
      kv_cache: [f16/f16, q8_0/q8_0]
    only: true        # search only the knobs listed (default: the defaults too)
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from inferfleet.bench.specs import validated
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Host, Model
from inferfleet.fleetfile.service import Service
from inferfleet.runtimes.base import gpu_devices

Value = int | float | str
MAX_VALUES = 16  # per knob
MAX_CANDIDATES = 256  # a space larger than this is not a search an evening affords


@dataclass(frozen=True)
class FlagKnob:
    """A server flag in ``extra_args``: ``names[0]`` is written, every alias is replaced."""

    names: tuple[str, ...]
    kinds: frozenset[str]
    memory: bool  # changes what the server allocates (refused next to another service)
    switch: tuple[str, str] | None = None  # (flag when on, flag when off): a flag without value


@dataclass(frozen=True)
class FieldKnob:
    """A key of the service in the fleet file (a path below the service)."""

    path: tuple[str, ...]
    kinds: frozenset[str]
    memory: bool


LLAMA = frozenset({"llama.cpp"})
VLLM = frozenset({"vllm"})

KNOBS: dict[str, FlagKnob | FieldKnob] = {
    "threads": FlagKnob(("-t", "--threads"), LLAMA, memory=False),
    "threads_batch": FlagKnob(("-tb", "--threads-batch"), LLAMA, memory=False),
    "batch": FlagKnob(("-b", "--batch-size"), LLAMA, memory=True),
    "ubatch": FlagKnob(("-ub", "--ubatch-size"), LLAMA, memory=True),  # compute buffer, L-30
    "n_gpu_layers": FlagKnob(("-ngl", "--n-gpu-layers", "--gpu-layers"), LLAMA, memory=True),
    "flash_attn": FieldKnob(("flash_attn",), LLAMA, memory=True),
    # The experts of the first N blocks in host memory, the others on their layer's GPU:
    # llama.cpp's --n-cpu-moe N as one entry of the service's ordered overrides (L-17).
    "n_cpu_moe": FieldKnob(("tensor_overrides",), LLAMA, memory=True),
    "kv_cache": FieldKnob(("kv_cache",), LLAMA | VLLM, memory=True),
    "ctx_per_slot": FieldKnob(("ctx_per_slot",), LLAMA | VLLM, memory=True),
    "draft_model": FieldKnob(("speculative", "draft_model"), LLAMA, memory=True),
    "draft_max": FieldKnob(("speculative", "draft_max"), LLAMA, memory=False),
    "draft_min": FieldKnob(("speculative", "draft_min"), LLAMA, memory=False),
    "draft_p_min": FieldKnob(("speculative", "draft_p_min"), LLAMA, memory=False),
    "max_num_batched_tokens": FlagKnob(("--max-num-batched-tokens",), VLLM, memory=True),
    # vLLM's --max-num-seqs is the service's slots (runtimes/vllm.py); each keeps its window.
    "max_num_seqs": FieldKnob(("parallel",), VLLM, memory=True),
    "chunked_prefill": FlagKnob(
        ("--enable-chunked-prefill", "--no-enable-chunked-prefill"),
        VLLM,
        memory=False,
        switch=("--enable-chunked-prefill", "--no-enable-chunked-prefill"),
    ),
}


EXPERT_TENSORS = r"ffn_(?:up|down|gate)_exps"
_CPU_MOE = re.compile(r"^blk\\\.\(\?:([0-9|]+)\)\\\." + re.escape(EXPERT_TENSORS) + "$")
# Expert tensor names an override is tried against to tell whether it moves experts.
_EXPERT_SAMPLES = tuple(
    f"blk.{block}.ffn_{part}_exps.weight"
    for block in (0, 1, 2, 7, 10, 31, 47, 63, 93, 127)
    for part in ("up", "down", "gate")
)


def cpu_moe_pattern(blocks: int) -> str:
    """The override pattern that keeps the experts of blocks 0..blocks-1 in host memory."""
    return rf"blk\.(?:{'|'.join(str(i) for i in range(blocks))})\.{EXPERT_TENSORS}"


def moves_experts(pattern: str) -> bool:
    """Whether a tensor override matches expert tensors (the knob decides those)."""
    try:
        found = re.compile(pattern)
    except re.error:
        return False
    return any(found.search(name) for name in _EXPERT_SAMPLES)


def _cpu_moe(service: Service) -> int | None:
    """N where the service's expert overrides are exactly the knob's; None otherwise."""
    experts = [o for o in service.tensor_overrides if moves_experts(o.pattern)]
    if not experts:
        return 0  # every block's experts on its layer's device
    if len(experts) == 1 and experts[0].device.upper() == "CPU":
        match = _CPU_MOE.match(experts[0].pattern)
        if match is not None:
            blocks = match.group(1).split("|")
            if blocks == [str(i) for i in range(len(blocks))]:
                return len(blocks)
    return None  # hand-written overrides: as declared


@dataclass(frozen=True)
class Candidate:
    """One setting of every knob; ``baseline`` is the service as the fleet file has it."""

    id: str
    settings: tuple[tuple[str, Value | None], ...]  # knob -> value (None: the runtime's default)
    baseline: bool = False

    @property
    def as_dict(self) -> dict[str, Value | None]:
        return dict(self.settings)

    def describe(self) -> str:
        return ", ".join(f"{k}={_shown(v)}" for k, v in self.settings) or "(as declared)"


@dataclass(frozen=True)
class Space:
    knobs: dict[str, tuple[Value, ...]]

    @property
    def memory(self) -> bool:
        """Whether a knob changes what the server allocates."""
        return any(KNOBS[k].memory for k in self.knobs)


class SpaceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    knobs: dict[str, list[int | float | str] | None] = Field(default_factory=dict)
    only: bool = False


def _shown(value: Value | None) -> str:
    return "default" if value is None else str(value)


def current(service: Service, knob: str) -> Value | None:
    """The knob's value as the service declares it; None where the runtime's default applies."""
    spec = KNOBS[knob]
    if isinstance(spec, FieldKnob):
        node: Any = service
        for part in spec.path:
            node = getattr(node, part, None)
            if node is None:
                return None
        if knob == "kv_cache":
            return f"{node.k}/{node.v}"
        if knob == "n_cpu_moe":
            return _cpu_moe(service)
        return node if isinstance(node, int | float | str) else None
    args = list(service.extra_args)
    found: Value | None = None
    for i, arg in enumerate(args):
        if spec.switch is not None and arg in spec.switch:
            found = "on" if arg == spec.switch[0] else "off"
        elif arg in spec.names and i + 1 < len(args):
            found = _number(args[i + 1])
        elif any(arg.startswith(f"{name}=") for name in spec.names):
            found = _number(arg.split("=", 1)[1])
    return found


def _number(text: str) -> Value:
    try:
        return int(text)
    except ValueError:
        return text


def default_space(
    service: Service,
    kind: str,
    host: Host,
    cpus: tuple[int, int],
    model: Model | None = None,
    moe_blocks: int | None = None,
) -> Space:
    """The knobs worth searching for this service on this host.

    ``cpus``: (physical cores, logical cores) of the host the search runs on;
    ``model``: the service's model, whose quality policy (``kv_cache_allowed``)
    names the KV cache types worth trying; ``moe_blocks``: the model's blocks when
    it has experts (from its header), for the operator's "how many expert blocks
    fit on the cards" loop: the budget prices every count before anything boots.
    """
    knobs: dict[str, tuple[Value, ...]] = {}
    allowed = [] if model is None else [f"{c.k}/{c.v}" for c in model.kv_cache_allowed]
    if allowed:
        declared = f"{service.kv_cache.k}/{service.kv_cache.v}"
        knobs["kv_cache"] = tuple(dict.fromkeys([declared, *allowed]))
    on_gpu = bool(gpu_devices(service, host))
    if kind == "llama.cpp":
        if not on_gpu:
            physical, logical = cpus
            threads = sorted({max(1, physical // 2), physical, logical})
            knobs["threads"] = tuple(threads)
        knobs["ubatch"] = (256, 512, 1024) if not on_gpu else (256, 512, 1024, 2048)
        if on_gpu and moe_blocks:
            knobs["n_cpu_moe"] = tuple(sorted({round(i * moe_blocks / 7) for i in range(8)}))
        knobs["flash_attn"] = ("on", "off")
        if service.drafter is not None:
            knobs["draft_max"] = (4, 8, 16)
    elif kind == "vllm":
        knobs["max_num_batched_tokens"] = (2048, 8192)
        knobs["chunked_prefill"] = ("on", "off")
        knobs["max_num_seqs"] = tuple(sorted({service.parallel, 2 * service.parallel}))
    return Space(knobs)


def load_space(path: Path) -> SpaceFile:
    """A ``--space`` file, validated (unknown keys and knobs are errors, not ignored)."""
    import yaml

    from inferfleet.bounded import read_bounded_text

    text = read_bounded_text(
        path, 64 * 1024, what="space file", error=UsageError, hint="check the path"
    )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"the space file is not YAML: {exc}", where=str(path)) from None
    hint = "knobs: {NAME: [values]}, only: true|false"
    found = validated(SpaceFile, data if data is not None else {}, where=str(path), hint=hint)
    unknown = sorted(set(found.knobs) - set(KNOBS))
    if unknown:
        raise UsageError(
            f"unknown knob(s): {', '.join(unknown)}",
            where=str(path),
            hint=f"knobs: {', '.join(sorted(KNOBS))}",
        )
    return found


def combine(default: Space, given: SpaceFile | None, kind: str, where: str) -> Space:
    """The space searched: the defaults with the file's knobs over them (or only those)."""
    knobs = {} if given is not None and given.only else dict(default.knobs)
    for name, values in (given.knobs if given is not None else {}).items():
        if not values:
            knobs.pop(name, None)
            continue
        if kind not in KNOBS[name].kinds:
            raise UsageError(
                f"knob {name!r} is not a {kind} setting",
                where=where,
                hint=f"{kind} knobs: {', '.join(k for k, v in KNOBS.items() if kind in v.kinds)}",
            )
        if len(values) > MAX_VALUES:
            raise UsageError(f"knob {name!r} has {len(values)} values (at most {MAX_VALUES})")
        knobs[name] = tuple(dict.fromkeys(values))
    space = Space(knobs)
    count = math.prod(len(v) for v in knobs.values())
    if count > MAX_CANDIDATES:
        raise UsageError(
            f"the space has {count} candidates (at most {MAX_CANDIDATES})",
            where=where,
            hint="narrow it with --space (fewer values, or only: true)",
        )
    if not knobs:
        raise UsageError(
            "nothing to tune: the space has no knob",
            where=where,
            hint="list knobs in a --space file",
        )
    return space


def candidates(service: Service, space: Space) -> list[Candidate]:
    """The baseline first, then every other combination of the space's values."""
    names = sorted(space.knobs)
    base = tuple((n, current(service, n)) for n in names)
    found = [Candidate("baseline", base, baseline=True)]
    for number, values in enumerate(itertools.product(*(space.knobs[n] for n in names)), 1):
        settings = tuple(zip(names, values, strict=True))
        if settings == base:
            continue  # the baseline already
        found.append(Candidate(f"c{number:03d}", settings))
    return found


def apply(service: Service, settings: Mapping[str, Value | None]) -> dict[str, Any]:
    """The ``set`` that makes the service run ``settings`` (merged by the bench arm)."""
    out: dict[str, Any] = {}
    args = list(service.extra_args)
    flags_changed = False
    for knob, value in settings.items():
        spec = KNOBS[knob]
        if value is None:
            continue  # as declared
        if isinstance(spec, FieldKnob):
            if knob == "kv_cache":
                k, _, v = str(value).partition("/")
                value_set: Any = {"k": k, "v": v or k}
            elif knob == "n_cpu_moe":
                value_set = _with_cpu_moe(service, int(value))
            else:
                value_set = value
            node = out
            for part in spec.path[:-1]:
                node = node.setdefault(part, {})
            node[spec.path[-1]] = value_set
            continue
        args = _without(args, spec)
        if spec.switch is not None:
            args.append(spec.switch[0] if value == "on" else spec.switch[1])
        else:
            args += [spec.names[0], str(value)]
        flags_changed = True
    if flags_changed:
        out["extra_args"] = args
    return out


def _with_cpu_moe(service: Service, blocks: int) -> list[dict[str, str]]:
    """The service's overrides with its expert overrides replaced by the knob's (first:
    the server takes the first match, L-17); the others kept in their order."""
    kept = [o.model_dump() for o in service.tensor_overrides if not moves_experts(o.pattern)]
    ours = [{"pattern": cpu_moe_pattern(blocks), "device": "CPU"}] if blocks > 0 else []
    return [*ours, *kept]


def _without(args: Sequence[str], spec: FlagKnob) -> list[str]:
    """``args`` with every occurrence of the knob's flag (and its value) removed."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if spec.switch is not None and arg in spec.switch:
            continue
        if arg in spec.names:
            skip = spec.switch is None
            continue
        if any(arg.startswith(f"{name}=") for name in spec.names):
            continue
        kept.append(arg)
    return kept
