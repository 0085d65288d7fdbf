"""The context memory of a llama-server: KV cache per layer and recurrent state per slot.

The arithmetic is :mod:`inferfleet.gguf.kv` (cells padded and capped the way
llama.cpp b11434 does, bytes per cell per layer); this module adds what a
*server* allocates around it:

- ``-ctk``/``-ctv`` take only the nine types llama.cpp lists for the KV cache;
  a quantized V cache needs flash attention (L-20);
- without flash attention V is stored transposed and padded to the widest
  layer;
- recurrent layers keep ``max(1, slots) x (1 + n_rs_seq)`` rows of f32 state
  (``llama_memory_recurrent``), independent of the context (L-29);
- a drafter's cache is sized by the *target's* context (L-15): the server
  copies ``-c`` and ``--parallel`` into the draft context.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.budget.errors import BudgetError
from inferfleet.budget.shape import ModelShape
from inferfleet.gguf import GGUFError
from inferfleet.gguf.kv import DEFAULT_UBATCH, CacheCells, cache_cells, layer_cell_bytes
from inferfleet.runtimes.llamacpp import CACHE_TYPES, UNQUANTIZED


@dataclass(frozen=True)
class ContextShape:
    """How the server is started: ``-c``, ``--parallel``, cache types, batch."""

    ctx: int  # the pool, -c: ctx_per_slot x parallel (L-25)
    parallel: int = 1
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: bool = True
    n_ubatch: int = DEFAULT_UBATCH
    unified: bool = False
    swa_full: bool = False
    n_rs_seq: int = 0  # extra recurrent rows kept for draft rollback

    def __post_init__(self) -> None:
        if self.ctx <= 0 or self.parallel <= 0 or self.n_ubatch <= 0:
            raise BudgetError(
                f"context {self.ctx}, slots {self.parallel} and ubatch {self.n_ubatch} "
                "must all be positive"
            )
        for part, value in (("K", self.cache_type_k), ("V", self.cache_type_v)):
            if value not in CACHE_TYPES:
                raise BudgetError(
                    f"llama.cpp has no {value!r} {part} cache",
                    hint=f"use one of: {', '.join(CACHE_TYPES)}",
                )
        if self.cache_type_v not in UNQUANTIZED and not self.flash_attn:
            raise BudgetError(
                f"a quantized V cache ({self.cache_type_v}) needs flash attention; "
                "llama-server refuses to start without it (L-20)",
                hint="set flash_attn: on, or an f16 V cache",
            )

    @property
    def ctx_per_slot(self) -> int:
        return self.ctx // self.parallel

    @property
    def ubatch(self) -> int:
        """llama.cpp clamps the micro-batch to the context."""
        return min(self.n_ubatch, self.ctx)


@dataclass(frozen=True)
class ContextMemory:
    """The KV and recurrent buffers of one context, per layer."""

    cells: CacheCells
    kv_by_layer: dict[int, int]  # bytes of each layer's KV cache (all streams)
    state_by_layer: dict[int, int]  # bytes of each recurrent layer's per-slot state

    @property
    def kv_bytes(self) -> int:
        return sum(self.kv_by_layer.values())

    @property
    def state_bytes(self) -> int:
        return sum(self.state_by_layer.values())

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.state_bytes


def context_memory(
    model: ModelShape, shape: ContextShape, *, layers: str = "main"
) -> ContextMemory:
    """KV and state of ``model`` started as ``shape``.

    ``layers="main"`` is the server's own context (nextn/MTP layers excluded,
    L-12); ``"mtp"`` is the draft context of ``--spec-type draft-mtp``, which
    holds only the nextn layers, sized by the same ``-c`` (L-15).
    """
    layout = model.layout
    cells = cache_cells(
        layout,
        shape.ctx,
        parallel=shape.parallel,
        n_ubatch=shape.ubatch,
        unified=shape.unified,
        swa_full=shape.swa_full,
    )
    kinds = ("nextn",) if layers == "mtp" else ("full", "swa")
    kv: dict[int, int] = {}
    for layer in layout.layers:
        if layer.kind not in kinds:
            continue
        try:
            per_cell = layer_cell_bytes(
                layout,
                layer,
                shape.cache_type_k,
                shape.cache_type_v,
                flash_attn=shape.flash_attn,
            )
        except GGUFError as exc:
            raise BudgetError(exc.message, where=model.location, hint=exc.hint) from None
        # An MTP context caches its nextn layers like full-attention ones.
        kv[layer.index] = per_cell * cells.cells(layer.kind) * cells.streams
    state: dict[int, int] = {}
    if model.recurrent is not None and layers == "main":
        rows = max(1, shape.parallel) * (1 + shape.n_rs_seq)
        for il in model.recurrent.layers:
            state[il] = model.recurrent.row_bytes * rows
    return ContextMemory(cells, kv, state)
