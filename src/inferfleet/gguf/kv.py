"""KV cache size from a GGUF header, the way llama.cpp allocates it (L-29).

Per token, each layer that keeps a KV cache costs ``kv_heads x head_dim x
bytes(type)`` for K plus the same for V. Which layers keep one follows
llama.cpp's model code (``src/llama-model.cpp``, ``src/models/*.cpp``):

- recurrent and linear-attention layers keep state per slot, not per token,
  and are excluded (hybrids pay KV only on their attention layers);
- sliding-window (SWA) layers live in a second cache whose size is capped by
  the window (``src/llama-kv-cache-iswa.cpp``);
- nextn/MTP layers (L-12) are excluded from the main context's cache;
- layers that reuse an earlier layer's cache (Gemma 3n/4) cost nothing.

The per-arch SWA patterns mirror ``load_swa_pattern(ml, n, dense_first)``
calls in llama.cpp; a file can override them with
``<arch>.attention.sliding_window_pattern`` (a bool per layer or a period).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from inferfleet.gguf.constants import ggml_type_by_name
from inferfleet.gguf.errors import GGUFError

LayerKind = Literal["full", "swa", "recurrent", "none", "shared", "nextn"]

# arch -> (period, dense_first) as in llama.cpp's load_swa_pattern calls.
SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False),
    "gemma3": (6, False),  # 5 local layers, then 1 global
    "gemma3n": (5, False),
    "gemma-embedding": (6, False),
    "cohere2": (4, False),
    "cohere2moe": (4, True),
    "exaone4": (4, False),
    "exaone-moe": (4, False),
    "olmo2": (4, False),
    "afmoe": (4, False),
    "mellum": (4, False),
    "muse-glimmer": (4, False),
    "llama4": (4, False),  # chunked attention, sized like SWA
    "gpt-oss": (2, False),
    "plamo3": (8, False),
    "smallthinker": (4, True),
    "modern-bert": (3, True),
    "laguna": (4, True),
}

# Architectures whose every layer is recurrent (llm_arch_is_recurrent).
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})

# Hybrids that mark a recurrent layer with head_count_kv == 0.
HYBRID_ARCHS = frozenset(
    {
        *("jamba", "falcon-h1", "plamo2", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h"),
        *("nemotron_h_moe", "qwen3next", "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next"),
        *("qwen35", "qwen35moe", "qwen4exp", "deepseek4", "minimax-01"),
    }
)

# llama.cpp pads both caches to 256 cells (llama-context.cpp, llama-kv-cache-iswa.cpp).
CELL_PAD = 256
# LLAMA_MAX_LAYERS (llama-hparams.h): llama.cpp refuses a model with more blocks,
# and a hostile block_count must not size per-layer lists.
MAX_LAYERS = 512
DEFAULT_UBATCH = 512


@dataclass(frozen=True)
class LayerAttention:
    """What one block costs in the KV cache."""

    index: int
    kind: LayerKind
    kv_heads: int
    key_length: int
    value_length: int  # 0 where there is no V cache (MLA)


@dataclass(frozen=True)
class AttentionLayout:
    """The per-layer attention facts of a model, read from its header."""

    n_layers: int  # block_count, nextn layers included
    n_nextn: int
    sliding_window: int  # 0 when the model has no SWA layers
    layers: tuple[LayerAttention, ...]
    notes: tuple[str, ...] = ()

    def indices(self, kind: LayerKind) -> tuple[int, ...]:
        return tuple(layer.index for layer in self.layers if layer.kind == kind)


@dataclass(frozen=True)
class KVPerToken:
    """Bytes one token adds to each cache (K plus V)."""

    full: int  # full-attention layers: paid for every token of context
    swa: int  # sliding-window layers: paid only up to the window
    nextn: int  # MTP layers, which live in the drafter's own context

    @property
    def uncapped(self) -> int:
        """Per token when the context fits in the window (SWA uncapped)."""
        return self.full + self.swa


def _pad(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def _per_layer(meta: Mapping[str, object], key: str, n: int, default: Sequence[int]) -> list[int]:
    """A scalar-or-array key (``get_key_or_arr``) as one int per layer."""
    value = meta.get(key)
    if isinstance(value, bool):
        return [int(value)] * n
    if isinstance(value, int):
        return [value] * n
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        values = [int(v) for v in value]
        # A short array repeats its last entry rather than inventing zeros.
        return (values + [values[-1]] * n)[:n]
    return list(default)


def _int(meta: Mapping[str, object], key: str, default: int = 0) -> int:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _swa_flags(
    meta: Mapping[str, object], arch: str, n_main: int, n: int
) -> tuple[list[bool], str]:
    """Which layers use the sliding window, and a note when it is a guess."""
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, tuple) and pattern and all(isinstance(v, bool) for v in pattern):
        flags = [bool(v) for v in pattern][:n]
        return flags + [False] * (n - len(flags)), ""
    period, dense_first = SWA_PATTERNS.get(arch, (-1, False))
    if isinstance(pattern, int) and not isinstance(pattern, bool):
        period = pattern
    if period < 0:
        return [False] * n, (
            f"{arch}.attention.sliding_window is set but inferfleet does not know which layers "
            "of this architecture use it: every layer is counted as full attention (an upper bound)"
        )
    # llama_hparams::set_swa_pattern: period 0 means every layer is SWA.
    flags = []
    for il in range(n):
        if il >= n_main:
            flags.append(False)  # nextn layers are never SWA
        elif period == 0:
            flags.append(True)
        elif dense_first:
            flags.append(il % period != 0)
        else:
            flags.append(il % period < period - 1)
    return flags, ""


def _recurrent_flags(meta: Mapping[str, object], arch: str, n_main: int, n: int) -> list[bool]:
    if arch in RECURRENT_ARCHS:
        return [True] * n
    marked = meta.get(f"{arch}.attention.recurrent_layers")
    if isinstance(marked, tuple) and marked:
        flags = [bool(v) for v in marked][:n]
        return flags + [False] * (n - len(flags))
    if isinstance(marked, bool):
        return [marked] * n
    interval = _int(meta, f"{arch}.full_attention_interval")
    if interval > 0:
        return [il < n_main and (il + 1) % interval != 0 for il in range(n)]
    return [False] * n


def attention_layout(meta: Mapping[str, object]) -> AttentionLayout | None:
    """The attention layout, or ``None`` when the header lacks the basics (or
    claims more blocks than llama.cpp loads)."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        return None
    n = _int(meta, f"{arch}.block_count")
    if n <= 0 or n > MAX_LAYERS:
        return None
    notes: list[str] = []
    n_nextn = min(_int(meta, f"{arch}.nextn_predict_layers"), n)
    n_main = n - n_nextn
    heads = _per_layer(meta, f"{arch}.attention.head_count", n, [0] * n)
    kv_heads = _per_layer(meta, f"{arch}.attention.head_count_kv", n, heads)
    n_embd = _int(meta, f"{arch}.embedding_length")
    # llama.cpp's default head size is n_embd / n_head of layer 0.
    default_head = n_embd // heads[0] if heads and heads[0] else 0
    k_len = _int(meta, f"{arch}.attention.key_length", default_head)
    v_len = _int(meta, f"{arch}.attention.value_length", default_head)
    k_len_swa = _int(meta, f"{arch}.attention.key_length_swa", k_len)
    v_len_swa = _int(meta, f"{arch}.attention.value_length_swa", v_len)
    # MLA (DeepSeek-style) caches one compressed K per token and no V.
    mla = bool(
        _int(meta, f"{arch}.attention.key_length_mla")
        and _int(meta, f"{arch}.attention.value_length_mla")
    )
    window = _int(meta, f"{arch}.attention.sliding_window")
    swa = [False] * n
    if window > 0:
        swa, note = _swa_flags(meta, arch, n_main, n)
        if note:
            notes.append(note)
    recurrent = _recurrent_flags(meta, arch, n_main, n)
    # Gemma 3n / 4: layers from here on reuse an earlier layer's cache.
    shared = _int(meta, f"{arch}.attention.shared_kv_layers")
    kv_from = n - shared if shared else (20 if arch == "gemma3n" else n)
    layers = []
    for il in range(n):
        kind: LayerKind
        if il >= n_main:
            kind = "nextn"
        elif recurrent[il] or (arch in HYBRID_ARCHS and kv_heads[il] == 0):
            kind = "recurrent"
        elif kv_heads[il] == 0:
            kind = "none"
        elif il >= kv_from:
            kind = "shared"
        else:
            kind = "swa" if swa[il] else "full"
        k = k_len_swa if swa[il] else k_len
        v = 0 if mla else (v_len_swa if swa[il] else v_len)
        layers.append(LayerAttention(il, kind, kv_heads[il], k, v))
    return AttentionLayout(n, n_nextn, window if any(swa) else 0, tuple(layers), tuple(notes))


def _row_bytes(type_name: str, n: int) -> int:
    cache = ggml_type_by_name(type_name)
    if n % cache.block_size:
        raise GGUFError(
            f"a KV row of {n} values is not a multiple of the {cache.name} block size "
            f"{cache.block_size}",
            hint="choose another cache type (-ctk/-ctv)",
        )
    return cache.row_bytes(n)


def v_row_values(layout: AttentionLayout, layer: LayerAttention, *, flash_attn: bool) -> int:
    """Values of one V row: without flash attention llama.cpp stores V
    transposed and pads every layer to the widest one (``n_embd_v_gqa_max``,
    ``[TAG_V_CACHE_VARIABLE]`` in ``llama-kv-cache.cpp``); MLA caches no V."""
    if not layer.value_length:
        return 0
    if flash_attn:
        return layer.kv_heads * layer.value_length
    return max(other.kv_heads * other.value_length for other in layout.layers)


def layer_cell_bytes(
    layout: AttentionLayout,
    layer: LayerAttention,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    *,
    flash_attn: bool = True,
) -> int:
    """Bytes one cache cell (one token of one stream) costs in this layer, K plus V."""
    k = _row_bytes(cache_type_k, layer.kv_heads * layer.key_length)
    v_values = v_row_values(layout, layer, flash_attn=flash_attn)
    return k + (_row_bytes(cache_type_v, v_values) if v_values else 0)


def kv_bytes_per_token(
    layout: AttentionLayout,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    *,
    flash_attn: bool = True,
) -> KVPerToken:
    """Bytes per token of context, split by which cache pays them (L-29)."""
    sums = {"full": 0, "swa": 0, "nextn": 0}
    for layer in layout.layers:
        if layer.kind in sums:
            sums[layer.kind] += layer_cell_bytes(
                layout, layer, cache_type_k, cache_type_v, flash_attn=flash_attn
            )
    return KVPerToken(full=sums["full"], swa=sums["swa"], nextn=sums["nextn"])


@dataclass(frozen=True)
class CacheCells:
    """How many cells each cache gets, the way llama.cpp sizes them."""

    n_ctx: int  # after llama.cpp's padding
    streams: int  # one per slot unless the cache is unified
    cells_full: int  # per stream
    cells_swa: int  # per stream; 0 without SWA layers

    def cells(self, kind: LayerKind) -> int:
        """Cells per stream of the cache a layer of this kind lives in."""
        if kind == "swa":
            return self.cells_swa
        return self.cells_full if kind in ("full", "nextn") else 0


@dataclass(frozen=True)
class KVEstimate(CacheCells):
    """The KV buffers llama.cpp allocates for a context (main model only): cells and bytes."""

    full_bytes: int
    swa_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.full_bytes + self.swa_bytes


def cache_cells(
    layout: AttentionLayout,
    ctx: int,
    *,
    parallel: int = 1,
    n_ubatch: int = DEFAULT_UBATCH,
    unified: bool = False,
    swa_full: bool = False,
) -> CacheCells:
    """Cells of ``llama-server -c ctx --parallel N`` for this model.

    Mirrors llama.cpp: ``n_ctx`` is padded to 256; without ``--kv-unified``
    each of the ``parallel`` slots gets its own stream of ``n_ctx/parallel``
    cells (padded to 256); the SWA cache holds
    ``pad256(min(cells, n_swa x (parallel if unified else 1) + n_ubatch))``
    cells per stream, or as many as the full cache with ``--swa-full``.
    """
    if ctx <= 0 or parallel <= 0:
        raise ValueError("ctx and parallel must be positive")
    n_ctx = _pad(ctx, CELL_PAD)
    if unified:
        streams, cells = 1, n_ctx
    else:
        streams, cells = parallel, _pad(n_ctx // parallel, CELL_PAD)
        n_ctx = cells * parallel  # llama.cpp rounds n_ctx to whole streams
    cells_swa = 0
    if layout.sliding_window and layout.indices("swa"):
        window = layout.sliding_window * (parallel if unified else 1) + n_ubatch
        cells_swa = cells if swa_full else _pad(min(cells, window), CELL_PAD)
    return CacheCells(n_ctx=n_ctx, streams=streams, cells_full=cells, cells_swa=cells_swa)


def kv_bytes(
    layout: AttentionLayout,
    ctx: int,
    *,
    parallel: int = 1,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_ubatch: int = DEFAULT_UBATCH,
    unified: bool = False,
    swa_full: bool = False,
    flash_attn: bool = True,
) -> KVEstimate:
    """The KV buffers of ``llama-server -c ctx --parallel N`` for this model
    (cells as :func:`cache_cells` sizes them)."""
    per_token = kv_bytes_per_token(layout, cache_type_k, cache_type_v, flash_attn=flash_attn)
    cells = cache_cells(
        layout, ctx, parallel=parallel, n_ubatch=n_ubatch, unified=unified, swa_full=swa_full
    )
    return KVEstimate(
        **asdict(cells),
        full_bytes=per_token.full * cells.cells_full * cells.streams,
        swa_bytes=per_token.swa * cells.cells_swa * cells.streams,
    )
