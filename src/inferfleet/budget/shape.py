"""What sizing needs from a GGUF header: dimensions, layout, tensor sizes, recurrent state.

:func:`model_shape` turns an :class:`~inferfleet.gguf.Inspection` into a
:class:`ModelShape`, the only model input of the pure budget functions (so
they can be tested with hand-made shapes and never read a file).

The attention layout (which layers keep a per-token KV cache, which use the
sliding window) comes from :mod:`inferfleet.gguf.kv`, whose per-architecture
table ``SWA_PATTERNS`` fills in what a header does not say (L-29): e.g. that
every sixth gemma3 layer is global. A layout that had to be guessed carries a
note, and the budget repeats it.

Recurrent and linear-attention layers keep a state per slot, not per token
(L-29). Its size follows ``llama_hparams::n_embd_r`` / ``n_embd_s`` of
llama.cpp b11434 (``src/llama-hparams.cpp``): one row of conv state and one
of recurrent state per layer and slot, in f32.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from inferfleet.budget.errors import BudgetError
from inferfleet.gguf import Inspection
from inferfleet.gguf.kv import MAX_LAYERS, AttentionLayout
from inferfleet.gguf.model import MetaValue

# Every layer of these keeps both an attention KV cache and a recurrent state
# (llama.cpp's filters for Falcon-H1 accept every layer for both).
BOTH_ATTENTION_AND_STATE = frozenset({"falcon-h1"})
# Hybrids whose MLP-only layers (n_ff > 0) keep neither KV nor state.
MLP_LAYERS_STATELESS = frozenset({"nemotron_h", "nemotron_h_moe"})
# llm_arch_supports_rs_rollback: these keep extra state rows for drafting.
RS_ROLLBACK_ARCHS = frozenset(
    {
        *("kimi-k3", "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "glm5-next"),
        *("nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe", "bailingmoe3"),
    }
)
STATE_BYTES = 4  # recurrent_type_r / recurrent_type_s are f32


@dataclass(frozen=True)
class RecurrentState:
    """Per-slot state of the recurrent layers (values per row, f32)."""

    layers: tuple[int, ...]
    r_values: int  # conv / token-shift state (n_embd_r)
    s_values: int  # recurrent state proper (n_embd_s)

    @property
    def row_bytes(self) -> int:
        return (self.r_values + self.s_values) * STATE_BYTES


@dataclass(frozen=True)
class ModelShape:
    """The facts of one model file that memory sizing uses."""

    location: str
    architecture: str
    layout: AttentionLayout
    n_embd: int
    n_ff: int  # widest feed-forward per token (MoE: the experts used)
    n_head: int  # widest layer
    n_vocab: int
    context_length: int | None  # trained context (the largest sensible per-slot window)
    # (name, bytes); unknown types count 0. Kept out of repr: thousands of entries.
    tensors: tuple[tuple[str, int], ...] = field(repr=False, default=())
    recurrent: RecurrentState | None = None
    notes: tuple[str, ...] = ()

    @property
    def n_layer(self) -> int:
        return self.layout.n_layers

    @property
    def head_dim_k(self) -> int:
        return max((layer.key_length for layer in self.layout.layers), default=0)

    @property
    def weights_bytes(self) -> int:
        return sum(size for _, size in self.tensors)

    @property
    def tied_output(self) -> bool:
        """No ``output.weight``: llama.cpp reuses the token embedding as the
        output matrix and loads a second copy on the output device."""
        names = {name for name, _ in self.tensors}
        return "output.weight" not in names and "token_embd.weight" in names

    def tensor_bytes(self, name: str) -> int:
        return next((size for n, size in self.tensors if n == name), 0)


def _int(meta: Mapping[str, MetaValue], key: str) -> int:
    value = meta.get(key)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, tuple):
        ints = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
        return max(ints, default=0)
    return 0


def _per_layer(meta: Mapping[str, MetaValue], key: str, n: int) -> list[int]:
    value = meta.get(key)
    if isinstance(value, tuple):
        ints = [v if isinstance(v, int) and not isinstance(v, bool) else 0 for v in value]
        return (ints + [0] * n)[:n]
    return [_int(meta, key)] * n


def recurrent_state(
    meta: Mapping[str, MetaValue], arch: str, layout: AttentionLayout
) -> RecurrentState | None:
    """The per-slot state of the recurrent layers, ``None`` when there are none."""
    if arch in BOTH_ATTENTION_AND_STATE:
        layers = tuple(range(layout.n_layers - layout.n_nextn))
    else:
        layers = layout.indices("recurrent")
    if arch in MLP_LAYERS_STATELESS:
        n_ff = _per_layer(meta, f"{arch}.feed_forward_length", layout.n_layers)
        layers = tuple(il for il in layers if n_ff[il] == 0)
    if not layers:
        return None
    n_embd = _int(meta, f"{arch}.embedding_length")
    d_conv = _int(meta, f"{arch}.ssm.conv_kernel")
    d_inner = _int(meta, f"{arch}.ssm.inner_size")
    d_state = _int(meta, f"{arch}.ssm.state_size")
    n_group = _int(meta, f"{arch}.ssm.group_count")
    wkv = _int(meta, f"{arch}.wkv.head_size")
    l_cache = _int(meta, f"{arch}.shortconv.l_cache")
    kda = _int(meta, f"{arch}.kda.head_dim")
    n_head = _int(meta, f"{arch}.attention.head_count")
    if wkv:  # RWKV: token shift rows and the wkv state
        shift = _int(meta, f"{arch}.token_shift_count") or 2
        r, s = shift * n_embd, n_embd * wkv
    elif l_cache:  # LFM2 short convolutions
        r, s = n_embd * (l_cache - 1), d_state * d_inner
    elif kda:  # Kimi delta attention
        r = 3 * (d_conv - 1 if d_conv > 0 else 3) * n_head * kda
        s = kda * kda * n_head
    else:  # Mamba / Mamba-2 / gated delta net: conv state and ssm state
        r = max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state)
        s = d_state * d_inner
    return RecurrentState(layers, r, s)


def _n_ff(meta: Mapping[str, MetaValue], arch: str) -> int:
    dense = _int(meta, f"{arch}.feed_forward_length")
    expert = _int(meta, f"{arch}.expert_feed_forward_length")
    used = _int(meta, f"{arch}.expert_used_count")
    shared = _int(meta, f"{arch}.expert_shared_feed_forward_length")
    return max(dense, expert * used + shared)


def model_shape(result: Inspection) -> ModelShape:
    """The sizing facts of an inspected model, or :class:`BudgetError`."""
    arch = result.architecture
    layout = result.layout
    blocks = result.block_count
    if blocks is not None and blocks > MAX_LAYERS:
        raise BudgetError(
            f"the header claims {blocks} blocks; llama.cpp loads at most {MAX_LAYERS}",
            where=result.location,
            hint="the file is corrupt or not a llama.cpp model",
        )
    if arch is None or layout is None:
        raise BudgetError(
            "the header has no general.architecture or <arch>.block_count: "
            "its attention layout (and so its KV cache) cannot be sized",
            where=result.location,
            hint="check that this is a llama.cpp model file, not a projector or an adapter",
        )
    meta = result.metadata
    notes = list(layout.notes)
    unknown = result.unknown_type_ids
    if unknown:
        notes.append(
            "tensors of unknown type ids "
            f"{', '.join(map(str, unknown))} have no known size and count 0 bytes (L-10)"
        )
    n_head = _int(meta, f"{arch}.attention.head_count")
    return ModelShape(
        location=result.location,
        architecture=arch,
        layout=layout,
        n_embd=_int(meta, f"{arch}.embedding_length"),
        n_ff=_n_ff(meta, arch),
        n_head=n_head,
        n_vocab=result.vocab_size or _int(meta, f"{arch}.vocab_size"),
        context_length=result.context_length,
        tensors=tuple((t.name, t.n_bytes or 0) for t in result.tensors),
        recurrent=recurrent_state(meta, arch, layout),
        notes=tuple(notes),
    )
