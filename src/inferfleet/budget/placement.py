"""Where llama.cpp puts a model's tensors and caches across a host's devices.

Mirrors ``llama_model::load_tensors`` of llama.cpp b11434 with every layer
offloaded (the adapter passes ``--n-gpu-layers 999`` to GPU services):

- the input layer (token embedding) always stays in host memory;
- the ``n_layer`` blocks and the output layer (``n_layer + 1`` slots) are cut
  at the cumulative, normalised split points: ``--tensor-split`` when given,
  else each device's memory; block ``il`` goes to the first device whose
  split point is above ``il / (n_layer + 1)``;
- a model without ``output.weight`` reuses the token embedding as output and
  loads a second copy of it on the output device;
- ``--split-mode none`` keeps everything on the first device; ``row`` and
  ``tensor`` spread each block's weights by the shares (``row`` keeps the KV
  cache on the first device, ``tensor`` splits it too);
- each layer's KV cache lives on that layer's device (``offload_kqv``);
- tensor overrides (L-17) move matching tensors, first match wins.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from inferfleet.budget.errors import BudgetError

HOST = "host"
SplitMode = Literal["none", "layer", "row", "tensor"]
_BLOCK = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class Target:
    """A memory pool the budget fills: one accelerator, or host memory."""

    name: str  # the fleet's device name, or "host"
    kind: Literal["gpu", "host"]
    memory: int | None  # bytes the runtime may use; None when the fleet does not say
    runtime_name: str  # llama.cpp's name: CUDA0, ROCm1, CPU


# For each layer slot (blocks, then the output layer): (target index, share).
LayerMap = list[list[tuple[int, float]]]


def f32(value: float) -> float:
    """Round to float32: llama.cpp computes the split points in float, and a
    layer on a boundary must land where the server puts it."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def split_points(shares: Sequence[float]) -> list[float]:
    """Cumulative, normalised shares: llama.cpp's split points."""
    if sum(shares) <= 0 or any(s < 0 for s in shares):
        raise BudgetError(
            f"tensor_split {list(shares)} needs non-negative shares with a positive sum",
            hint="e.g. tensor_split: [3, 1] puts three quarters of the layers on the first device",
        )
    running, cumulative = 0.0, []
    for share in shares:
        running = f32(running + f32(share))
        cumulative.append(running)
    return [f32(point / running) for point in cumulative]


def layer_slots(n_layer: int, points: Sequence[float]) -> list[int]:
    """Device position (in the GPU list) of each block and of the output layer."""
    slots = n_layer + 1
    last = len(points) - 1
    return [min(bisect.bisect_right(points, f32(il / slots)), last) for il in range(slots)]


@dataclass(frozen=True)
class LayerPlacement:
    """Where each layer slot's weights and caches go."""

    weights: LayerMap
    caches: LayerMap
    host: int  # index of the host target

    def output(self) -> list[tuple[int, float]]:
        return self.weights[-1]


def place_layers(
    n_layer: int,
    targets: Sequence[Target],
    *,
    split_mode: SplitMode = "layer",
    shares: Sequence[float] = (),
) -> LayerPlacement:
    """The layer map of a model with ``n_layer`` blocks over ``targets``."""
    host = next(i for i, t in enumerate(targets) if t.kind == "host")
    gpus = [i for i, t in enumerate(targets) if t.kind == "gpu"]
    slots = n_layer + 1
    if not gpus:
        whole: LayerMap = [[(host, 1.0)] for _ in range(slots)]
        return LayerPlacement(whole, whole, host)
    if shares and len(shares) != len(gpus):
        raise BudgetError(
            f"tensor_split has {len(shares)} shares for {len(gpus)} devices",
            hint="give one share per device, in the service's devices order",
        )
    weights_of = list(shares) or [float(targets[i].memory or 0) for i in gpus]
    if split_mode == "none":
        first: LayerMap = [[(gpus[0], 1.0)] for _ in range(slots)]
        return LayerPlacement(first, first, host)
    points = split_points(weights_of)
    if split_mode in ("row", "tensor"):
        spread = [(gpus[k], p - (points[k - 1] if k else 0.0)) for k, p in enumerate(points)]
        spread = [(i, f) for i, f in spread if f > 0]
        spread_map: LayerMap = [list(spread) for _ in range(slots)]
        main: LayerMap = [[(gpus[0], 1.0)] for _ in range(slots)]
        return LayerPlacement(spread_map, spread_map if split_mode == "tensor" else main, host)
    by_layer: LayerMap = [[(gpus[k], 1.0)] for k in layer_slots(n_layer, points)]
    return LayerPlacement(by_layer, by_layer, host)


def compile_overrides(
    overrides: Sequence[tuple[str, str]], targets: Sequence[Target]
) -> list[tuple[re.Pattern[str], int, str]]:
    """(regex, target index, pattern text) in first-match order (L-17)."""
    by_name = {t.name: i for i, t in enumerate(targets)}
    by_runtime = {t.runtime_name: i for i, t in enumerate(targets) if t.kind == "gpu"}
    host = next(i for i, t in enumerate(targets) if t.kind == "host")
    compiled = []
    for pattern, device in overrides:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise BudgetError(
                f"tensor override {pattern!r} is not a regular expression: {exc}",
                hint="llama.cpp searches tensor names with std::regex (ECMAScript)",
            ) from None
        if device.upper() == "CPU":
            index = host
        elif device in by_name:
            index = by_name[device]
        elif device in by_runtime:
            index = by_runtime[device]
        else:
            raise BudgetError(
                f"tensor override {pattern!r} targets {device!r}, which is not a device "
                "of this service",
                hint=f"use CPU or one of: {', '.join(t.name for t in targets if t.kind == 'gpu')}",
            )
        compiled.append((regex, index, pattern))
    return compiled


@dataclass(frozen=True)
class WeightPlacement:
    per_target: list[int]
    overridden: dict[str, int]  # pattern -> tensors it moved (0: it matched nothing, L-17)


def place_weights(
    tensors: Sequence[tuple[str, int]],
    placement: LayerPlacement,
    n_targets: int,
    *,
    overrides: Sequence[tuple[re.Pattern[str], int, str]] = (),
    tied_output: bool = False,
) -> WeightPlacement:
    """Bytes of weights on each target."""
    per = [0] * n_targets
    hits = {text: 0 for _, _, text in overrides}
    n_layer = len(placement.weights) - 1
    for name, size in tensors:
        target = next(((i, text) for regex, i, text in overrides if regex.search(name)), None)
        if target is not None:
            per[target[0]] += size
            hits[target[1]] += 1
            continue
        match = _BLOCK.match(name)
        if match is not None and int(match.group(1)) < n_layer:
            shares = placement.weights[int(match.group(1))]
        elif name.startswith("output"):
            shares = placement.output()
        else:
            shares = [(placement.host, 1.0)]  # the input layer stays in host memory
        for index, fraction in shares:
            per[index] += round(size * fraction)
    if tied_output:
        embedding = next((size for name, size in tensors if name == "token_embd.weight"), 0)
        for index, fraction in placement.output():
            if index != placement.host:  # on the host it is the same mapped tensor
                per[index] += round(embedding * fraction)
    return WeightPlacement(per, hits)


def place_by_layer(values: dict[int, int], layer_map: LayerMap, n_targets: int) -> list[int]:
    """Per-layer byte counts (a KV cache, a recurrent state) summed per target."""
    per = [0] * n_targets
    last = len(layer_map) - 1
    for il, size in values.items():
        for index, fraction in layer_map[min(il, last)]:
            per[index] += round(size * fraction)
    return per
