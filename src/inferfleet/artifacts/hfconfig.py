"""A Hugging Face ``config.json``: what sizing a vLLM service needs from it.

:func:`attention_config` reads the attention shape of every layer: layers,
KV heads (``num_key_value_heads``, else ``num_attention_heads``), head size
(``head_dim``, else ``hidden_size / num_attention_heads``), the dtype the
weights were saved in, and which layers use a sliding window.

Which layers slide is what vLLM 0.32's model code reads from the config
transformers builds: ``layer_types[i] == "sliding_attention"`` gives layer
``i`` the window ``sliding_window`` (``model_executor/models/llama.py``,
``gemma3.py``, ``qwen2.py``...), and a sliding layer without a window is a
full one. Where ``config.json`` has no ``layer_types``, transformers (5.x)
fills them in for some families, and so do we, the same way: Gemma 2
alternates (even layers slide), Gemma 3 slides except every
``sliding_window_pattern``-th layer (default 6), Qwen2/Qwen3 slide from
``max_window_layers`` (default 28) on and Qwen2-MoE on odd-numbered layers
below it, both only with ``use_sliding_window``; a missing Gemma window is
transformers' 4096, and a window of 0 is none (vLLM's reading). Any other
config with a ``sliding_window`` but no ``layer_types`` (Mistral) is sized
with every layer full, as vLLM runs it, and says so. Layer types other than
full and sliding attention (linear attention, Mamba) are refused: their
state is not per token.

Multimodal configs keep the language model's fields under ``text_config``;
those are read, as vLLM does (``hf_text_config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from inferfleet.artifacts.safetensors import SafetensorsError
from inferfleet.bounded import parse_json, read_bounded

MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_LAYERS = 4096
MAX_HEADS = 65536
MAX_HEAD_DIM = 65536
# transformers' torch_dtype strings (and a few aliases) -> bytes per element.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float": 4, "half": 2}
SLIDING = "sliding_attention"
FULL = "full_attention"
# transformers' defaults for what config.json may leave out.
DEFAULT_WINDOW = {"gemma2": 4096, "gemma3": 4096, "gemma3_text": 4096}
QWEN_MAX_WINDOW_LAYERS = 28


@dataclass(frozen=True)
class AttentionConfig:
    """The per-token KV shape of a transformer, from its ``config.json``."""

    location: str
    model_type: str
    architecture: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    dtype: str | None  # torch_dtype / dtype as saved; None when the config has none
    sliding_window: int | None
    layer_types: tuple[str, ...]  # FULL or SLIDING, one per layer
    max_position_embeddings: int | None
    notes: tuple[str, ...] = ()

    @property
    def sliding_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == SLIDING)


def _error(where: str, field: str, message: str) -> SafetensorsError:
    return SafetensorsError(
        f"config.json field {field!r}: {message}",
        where=where,
        hint="use the model's own config.json (transformers writes it with save_pretrained)",
    )


def _int(
    config: Mapping[str, object], field: str, where: str, *, limit: int, required: bool = True
) -> int | None:
    value = config.get(field)
    if value is None:
        if required:
            raise _error(where, field, "missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit:
        raise _error(where, field, f"{str(value)[:40]!r} is not a whole number in 1..{limit}")
    return value


def _window(config: Mapping[str, object], model_type: str, where: str) -> int | None:
    """The window sliding layers get, or None: no window (those layers are then full).

    transformers' defaults apply where config.json leaves it out (Gemma: 4096);
    ``use_sliding_window: false`` (Qwen2-style) and 0 (vLLM's reading) mean none.
    """
    if "use_sliding_window" in config and config.get("use_sliding_window") is not True:
        return None
    if config.get("sliding_window") == 0:
        return None
    window = _int(config, "sliding_window", where, limit=1 << 31, required=False)
    if window is None and "sliding_window" not in config:
        return DEFAULT_WINDOW.get(model_type)
    return window


def _pattern(config: Mapping[str, object], model_type: str, n: int, where: str) -> list[str]:
    """transformers' own layer_types for a config.json without them (per family)."""
    if model_type == "gemma2":
        return [SLIDING if (i + 1) % 2 else FULL for i in range(n)]
    if model_type in ("gemma3", "gemma3_text"):
        every = _int(config, "sliding_window_pattern", where, limit=MAX_LAYERS, required=False)
        return [SLIDING if (i + 1) % (every or 6) else FULL for i in range(n)]
    first = _int(config, "max_window_layers", where, limit=MAX_LAYERS, required=False)
    first = QWEN_MAX_WINDOW_LAYERS if first is None else first
    if model_type == "qwen2_moe":
        return [SLIDING if (i + 1) % 2 and i < first else FULL for i in range(n)]
    if "use_sliding_window" in config:  # Qwen2 / Qwen3
        return [SLIDING if i >= first else FULL for i in range(n)]
    return [FULL] * n


def _layer_types(
    config: Mapping[str, object], model_type: str, n_layers: int, where: str
) -> tuple[tuple[str, ...], int | None, list[str]]:
    """Each layer's kind and the window of the sliding ones; notes on what was assumed."""
    notes: list[str] = []
    window = _window(config, model_type, where)
    declared = config.get("layer_types")
    if declared is not None:
        if not isinstance(declared, list) or len(declared) != n_layers:
            raise _error(where, "layer_types", f"must list one type per layer ({n_layers})")
        for index, kind in enumerate(declared):
            if kind not in (FULL, SLIDING):
                raise _error(
                    where,
                    "layer_types",
                    f"layer {index} is {str(kind)[:40]!r}: only full_attention and "
                    "sliding_attention layers keep a per-token KV cache this budget sizes",
                )
        types = list(declared)
    else:
        types = _pattern(config, model_type, n_layers, where)
        if SLIDING not in types and window is not None and "use_sliding_window" not in config:
            notes.append(
                f"config.json has sliding_window {window} but no layer_types: every layer is "
                "sized as full attention (vLLM applies a window only to layers listed as "
                "sliding_attention)"
            )
    if window is None:
        return (FULL,) * n_layers, None, notes  # vLLM gives "sliding" layers no window
    return tuple(types), window if SLIDING in types else None, notes


def attention_config(config: Mapping[str, object], where: str = "config.json") -> AttentionConfig:
    """The attention shape of ``config`` (a parsed ``config.json``), or a SafetensorsError
    naming the file (``where``) and the field."""
    outer = config
    inner = config.get("text_config")
    if isinstance(inner, dict):
        config = inner
    model_type = config.get("model_type") or outer.get("model_type") or ""
    if not isinstance(model_type, str):
        raise _error(where, "model_type", "must be a string")
    archs = outer.get("architectures") or []
    architecture = (
        archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    )
    if config.get("kv_lora_rank") is not None:
        raise _error(
            where,
            "kv_lora_rank",
            "a multi-head latent attention (MLA) model caches a compressed latent per token, "
            "not K and V per head; this budget does not size it",
        )
    n_layers = _int(config, "num_hidden_layers", where, limit=MAX_LAYERS)
    n_heads = _int(config, "num_attention_heads", where, limit=MAX_HEADS)
    assert n_layers is not None and n_heads is not None
    n_kv = _int(config, "num_key_value_heads", where, limit=MAX_HEADS, required=False) or n_heads
    head_dim = _int(config, "head_dim", where, limit=MAX_HEAD_DIM, required=False)
    if head_dim is None:
        hidden = _int(config, "hidden_size", where, limit=MAX_HEADS * MAX_HEAD_DIM)
        assert hidden is not None
        if hidden % n_heads:
            raise _error(
                where,
                "head_dim",
                f"missing, and hidden_size {hidden} is not a multiple of "
                f"num_attention_heads {n_heads}",
            )
        head_dim = hidden // n_heads
    dtype = config.get("dtype") or config.get("torch_dtype") or outer.get("dtype")
    dtype = dtype or outer.get("torch_dtype")
    if dtype is not None and (not isinstance(dtype, str) or dtype not in DTYPE_BYTES):
        raise _error(
            where, "torch_dtype", f"{str(dtype)[:40]!r} is not one of {', '.join(DTYPE_BYTES)}"
        )
    types, window, notes = _layer_types(config, model_type, n_layers, where)
    max_pos = _int(config, "max_position_embeddings", where, limit=1 << 31, required=False)
    return AttentionConfig(
        location=where,
        model_type=model_type,
        architecture=architecture,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        dtype=dtype,
        sliding_window=window,
        layer_types=types,
        max_position_embeddings=max_pos,
        notes=tuple(notes),
    )


def parse_config(data: bytes, where: str) -> AttentionConfig:
    """``config.json``'s bytes (bounded) as an :class:`AttentionConfig`."""
    if len(data) > MAX_CONFIG_BYTES:
        raise SafetensorsError(
            f"config.json is {len(data):,} bytes (limit {MAX_CONFIG_BYTES:,})", where=where
        )
    parsed = parse_json(data, what="config.json", where=where, error=SafetensorsError)
    if not isinstance(parsed, dict):
        raise SafetensorsError("config.json is not a JSON object", where=where)
    return attention_config(parsed, where)


def read_config(folder: Path) -> AttentionConfig:
    """The ``config.json`` of a model folder on this machine."""
    path = folder / "config.json"
    hint = "a vLLM model folder holds config.json next to its safetensors files"
    try:
        data = read_bounded(
            path, MAX_CONFIG_BYTES, what="config.json", error=SafetensorsError, hint=hint
        )
    except FileNotFoundError:
        raise SafetensorsError(
            "cannot read config.json: No such file or directory", where=str(path), hint=hint
        ) from None
    return parse_config(data, str(path))
