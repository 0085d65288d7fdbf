"""A service's memory per device: fits or not, with the margin; the largest context that fits.

Pure: a :class:`BudgetRequest` (model shapes, how the server starts, the
devices) goes in, a :class:`Budget` comes out. Per target the budget holds

- weights, placed by layer split and tensor overrides (:mod:`.placement`);
- KV cache (exact, per layer, :mod:`.context`) and recurrent state;
- a compute buffer estimate (:mod:`.compute`), or the non-KV cost measured
  by real boots when a :class:`~inferfleet.budget.boots.Calibration` is given (L-27);
- the vision projector at 1.5x its file size (L-28), on the first device;
- the drafter: its weights, its compute, and its KV sized by the target's
  context (L-15); ``draft-mtp`` without a drafter file caches the model's own
  nextn layers (L-12);
- headroom, kept free (llama.cpp's ``--fit`` also leaves 1024 MiB per device).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from inferfleet.budget.boots import Calibration
from inferfleet.budget.compute import device_compute, host_compute, output_buffer
from inferfleet.budget.context import ContextShape, context_memory
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.placement import (
    SplitMode,
    Target,
    compile_overrides,
    place_by_layer,
    place_layers,
    place_weights,
)
from inferfleet.budget.shape import ModelShape
from inferfleet.gguf.kv import CacheCells

MIB = 1 << 20
DEFAULT_HEADROOM = 1024 * MIB  # llama.cpp's default --fit-target per device
PROJECTOR_FACTOR = 1.5  # L-28
SOLVE_STEP = 4096  # L-27: ctx per slot is a multiple of this
SOLVE_CEILING = 1 << 20  # per-slot ctx searched when the trained context is unknown


@dataclass(frozen=True)
class Drafter:
    """A speculative drafter: a second model, or the model's own MTP layers."""

    model: ModelShape | None  # None: draft-mtp on the target's nextn layers
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    device: str | None = None  # the one device it is pinned to (L-16)


@dataclass(frozen=True)
class BudgetRequest:
    model: ModelShape
    context: ContextShape
    targets: tuple[Target, ...]  # the service's GPUs in order, then host memory
    split_mode: SplitMode = "layer"
    shares: tuple[float, ...] = ()
    overrides: tuple[tuple[str, str], ...] = ()  # (pattern, device), first match wins
    projector_bytes: int | None = None  # the mmproj file's size
    drafter: Drafter | None = None
    headroom: int = DEFAULT_HEADROOM
    calibration: Calibration | None = None


@dataclass(frozen=True)
class DeviceUse:
    """One target's bill, in bytes."""

    target: Target
    weights: int = 0
    kv: int = 0
    state: int = 0  # recurrent layers' per-slot state
    compute: int = 0
    output: int = 0
    projector: int = 0
    drafter: int = 0
    headroom: int = 0
    measured: bool = False  # weights + compute come from real boots

    @property
    def used(self) -> int:
        parts = (self.weights, self.kv, self.state, self.compute, self.output, self.projector)
        return sum(parts) + self.drafter

    @property
    def margin(self) -> int | None:
        """Bytes left after use and headroom; negative when it does not fit."""
        if self.target.memory is None:
            return None
        return self.target.memory - self.used - self.headroom

    @property
    def fits(self) -> bool | None:
        margin = self.margin
        return None if margin is None else margin >= 0


@dataclass(frozen=True)
class Budget:
    request: BudgetRequest
    cells: CacheCells
    devices: tuple[DeviceUse, ...]
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """Every device whose size is known fits (unknown sizes are noted)."""
        return all(d.fits is not False for d in self.devices)

    @property
    def kv_bytes(self) -> int:
        return sum(d.kv for d in self.devices)

    def device(self, name: str) -> DeviceUse:
        return next(d for d in self.devices if d.target.name == name)


@dataclass
class _Bill:
    weights: list[int]
    kv: list[int]
    state: list[int]
    compute: list[int]
    drafter: list[int]
    notes: list[str] = field(default_factory=list)


def _add(into: list[int], values: Sequence[int]) -> None:
    for i, value in enumerate(values):
        into[i] += value


def _drafter(request: BudgetRequest, bill: _Bill) -> None:
    drafter = request.drafter
    if drafter is None:
        return
    # The server copies -c and --parallel into the draft context (L-15).
    shape = replace(
        request.context,
        cache_type_k=drafter.cache_type_k,
        cache_type_v=drafter.cache_type_v,
        n_rs_seq=0,
    )
    own = drafter.model
    model = own if own is not None else request.model
    targets = request.targets
    if drafter.device is not None:
        if not any(t.name == drafter.device and t.kind == "gpu" for t in targets):
            raise BudgetError(
                f"the drafter is pinned to {drafter.device!r}, which is not a device of "
                "this service",
                hint=f"use one of: {', '.join(t.name for t in targets if t.kind == 'gpu')}",
            )
        targets = tuple(t for t in targets if t.kind == "host" or t.name == drafter.device)
    placement = place_layers(model.n_layer, targets)
    memory = context_memory(model, shape, layers="main" if own is not None else "mtp")
    local = [0] * len(targets)
    if own is not None:
        weights = place_weights(own.tensors, placement, len(targets), tied_output=own.tied_output)
        _add(local, weights.per_target)
    elif model.layout.n_nextn == 0:
        bill.notes.append(
            "draft-mtp needs nextn (MTP) layers and this model has none: the server will "
            "fail to load it (L-12)"
        )
    else:
        bill.notes.append(
            "draft-mtp runs on the model's own nextn layers: its weights are already counted; "
            "its cache holds those layers at the service's context (L-12, L-15)"
        )
    _add(local, place_by_layer(memory.kv_by_layer, placement.caches, len(targets)))
    _add(local, place_by_layer(memory.state_by_layer, placement.caches, len(targets)))
    # Its compute buffer lands with its output layer (L-30).
    local[placement.output()[0][0]] += device_compute(model, shape, memory.cells).total
    for position, target in enumerate(targets):
        bill.drafter[request.targets.index(target)] += local[position]


def _compute(request: BudgetRequest, cells: CacheCells, layer_targets: set[int]) -> list[int]:
    """Compute buffers: one per device running layers; the host's is small
    when accelerators run the layers (L-30)."""
    per = [0] * len(request.targets)
    estimate = device_compute(request.model, request.context, cells).total
    for index, target in enumerate(request.targets):
        if target.kind == "gpu" and index in layer_targets:
            per[index] = estimate
    host = next(i for i, t in enumerate(request.targets) if t.kind == "host")
    if not any(t.kind == "gpu" for t in request.targets):
        per[host] = estimate
    elif host in layer_targets:  # overrides put layer weights in host memory: the CPU runs them
        per[host] = device_compute(request.model, request.context, cells).activations
    else:
        per[host] = host_compute(request.model, request.context)
    return per


def plan(request: BudgetRequest) -> Budget:
    """The bill of every target for this request."""
    targets = request.targets
    n = len(targets)
    if sum(1 for t in targets if t.kind == "host") != 1:
        raise BudgetError("a budget needs exactly one host-memory target")
    model = request.model
    placement = place_layers(
        model.n_layer, targets, split_mode=request.split_mode, shares=request.shares
    )
    overrides = compile_overrides(request.overrides, targets)
    weights = place_weights(
        model.tensors, placement, n, overrides=overrides, tied_output=model.tied_output
    )
    memory = context_memory(model, request.context)
    bill = _Bill(
        weights=list(weights.per_target),
        kv=place_by_layer(memory.kv_by_layer, placement.caches, n),
        state=place_by_layer(memory.state_by_layer, placement.caches, n),
        compute=[0] * n,
        drafter=[0] * n,
        notes=list(model.notes),
    )
    for pattern, hits in weights.overridden.items():
        if hits == 0:
            bill.notes.append(f"tensor override {pattern!r} matches no tensor of the model (L-17)")
    layer_targets = {i for slot in placement.weights[:-1] for i, _ in slot}
    layer_targets |= {
        i for regex, i, _ in overrides for name, _ in model.tensors if regex.search(name)
    }
    bill.compute = _compute(request, memory.cells, layer_targets)
    _drafter(request, bill)
    host = placement.host
    first_gpu = next((i for i, t in enumerate(targets) if t.kind == "gpu"), host)
    devices = []
    for i, target in enumerate(targets):
        measured = request.calibration is not None and target.name in request.calibration.devices
        use = DeviceUse(
            target=target,
            weights=bill.weights[i],
            kv=bill.kv[i],
            state=bill.state[i],
            compute=bill.compute[i],
            output=output_buffer(model, request.context) if i == host else 0,
            projector=int(request.projector_bytes * PROJECTOR_FACTOR)
            if request.projector_bytes and i == first_gpu
            else 0,
            drafter=bill.drafter[i],
            headroom=request.headroom,
        )
        if measured and request.calibration is not None:
            non_kv = request.calibration.non_kv(target.name, memory.cells.n_ctx)
            use = replace(use, weights=non_kv, compute=0, measured=True)
        devices.append(use)
    notes = bill.notes
    if request.calibration is not None:
        notes.extend(request.calibration.notes)
    return Budget(request, memory.cells, tuple(devices), tuple(notes))


@dataclass(frozen=True)
class Solution:
    """The largest per-slot context that fits, and the budget at it."""

    ctx_per_slot: int | None  # None: not even one step fits
    budget: Budget  # at the solution, or at the smallest step when none fits
    limit: str  # what stopped the search


def solve(request: BudgetRequest, *, step: int = SOLVE_STEP) -> Solution:
    """The largest ``ctx_per_slot`` (a multiple of ``step``, L-27) that fits.

    Memory only grows with the context, so a binary search over multiples of
    ``step`` finds it; the model's trained context caps the search.
    """
    parallel = request.context.parallel
    trained = request.model.context_length
    ceiling = (trained if trained else SOLVE_CEILING) // step

    def at(k: int) -> Budget:
        shape = replace(request.context, ctx=k * step * parallel)
        return plan(replace(request, context=shape))

    if ceiling < 1:
        low = at(1)
        return Solution(None, low, f"the trained context ({trained}) is below one step of {step}")
    lowest = at(1)
    if not lowest.fits:
        return Solution(None, lowest, f"even {step} tokens per slot do not fit")
    lo, hi = 1, ceiling
    if at(hi).fits:
        reason = "the model's trained context" if trained else "the search ceiling"
        return Solution(hi * step, at(hi), f"{reason} ({hi * step} per slot)")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).fits:
            lo = mid
        else:
            hi = mid
    return Solution(lo * step, at(lo), "device memory")
