"""An estimate of llama.cpp's compute buffers (the graph's scratch memory).

The compute buffer is the peak of the graph allocator for one micro-batch of
``n_ubatch`` tokens (L-30: it grows with ``--ubatch-size``). Measured on
llama.cpp b11434 (CPU backend, Gemma 3 270M, ``sched_reserve: CPU compute
buffer size``), it is the sum of:

- activations: ``n_ubatch x c x (n_ff + n_embd + n_head x head_dim) x 4``
  bytes, with ``c = 2.5`` with flash attention and ``1.7`` without (the
  measured 23.28 MiB at ``-c 8192 -np 2`` is 18.28 MiB of this plus masks);
- the attention masks: one per cache (full, SWA), ``cells x n_ubatch``
  values, f16 with flash attention and f32 without;
- without flash attention the score matrix ``n_head x cells x n_ubatch`` f32
  of the largest cache (333 MiB at ``-c 32768 -fa off``, 51 MiB with it);
- with flash attention over a quantized K cache, Q converted to K's type
  (``n_ubatch x n_head x head_dim`` values: +0.53 MiB for q8_0 here).

The activation factor is fitted on one model and one backend, so this is an
estimate: L-27 prices a budget from two measured boots, which ``budget
--boot`` / ``--from-log`` do. Logits (``slots x n_vocab`` f32) are the
output buffer, held in host memory, not in the compute buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.budget.context import ContextShape
from inferfleet.budget.shape import ModelShape
from inferfleet.gguf.constants import ggml_type_by_name
from inferfleet.gguf.kv import CacheCells
from inferfleet.runtimes.llamacpp import UNQUANTIZED

FLOAT = 4
HALF = 2
ACTIVATION_FACTOR_FA = 2.5
ACTIVATION_FACTOR_NO_FA = 1.7


@dataclass(frozen=True)
class ComputeEstimate:
    activations: int
    masks: int
    scores: int  # the KQ matrix without flash attention; 0 with it
    converted_q: int = 0  # Q in a quantized K cache's type (flash attention)

    @property
    def total(self) -> int:
        return self.activations + self.masks + self.scores + self.converted_q


def device_compute(model: ModelShape, shape: ContextShape, cells: CacheCells) -> ComputeEstimate:
    """The compute buffer of a device that runs layers of ``model``."""
    tokens = shape.ubatch
    factor = ACTIVATION_FACTOR_FA if shape.flash_attn else ACTIVATION_FACTOR_NO_FA
    width = model.n_ff + model.n_embd + model.n_head * model.head_dim_k
    activations = int(tokens * factor * width * FLOAT)
    mask_value = HALF if shape.flash_attn else FLOAT
    # Masks cover every stream: [cells, n_ubatch / streams, 1, streams].
    masks = 0
    layout = model.layout
    if layout.indices("full") or layout.indices("nextn"):
        masks += cells.cells_full * tokens * mask_value
    if cells.cells_swa:
        masks += cells.cells_swa * tokens * mask_value
    scores = converted = 0
    if not shape.flash_attn:
        largest = max(cells.cells_full, cells.cells_swa)
        scores = model.n_head * largest * tokens * FLOAT
    elif shape.cache_type_k not in UNQUANTIZED:
        k_type = ggml_type_by_name(shape.cache_type_k)
        q_values = model.n_head * model.head_dim_k
        converted = tokens * (q_values // k_type.block_size) * k_type.type_size
    return ComputeEstimate(activations, masks, scores, converted)


def host_compute(model: ModelShape, shape: ContextShape) -> int:
    """Host-side compute buffer when the layers run on accelerators: the
    input embedding rows of one micro-batch, and their scaled copy."""
    return 2 * shape.ubatch * model.n_embd * FLOAT


def output_buffer(model: ModelShape, shape: ContextShape) -> int:
    """The logits buffer (``llama_context: CPU output buffer``): one row of
    the vocabulary per slot, f32, in host memory."""
    return shape.parallel * model.n_vocab * FLOAT
