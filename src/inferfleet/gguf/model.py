"""What a GGUF header says: raw header data and the facts derived from it.

:class:`GGUFHeader` is one file's parsed header; :class:`Inspection` is the
model as a loader sees it (one file, or all parts of a split GGUF together)
with the facts sizing and checks need: architecture, layers, heads, sliding
window, nextn layers, experts, tokenizer, tensor type histogram, per-layer
bytes and the KV cost per token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeAlias, TypeVar, overload

from inferfleet.gguf import kv
from inferfleet.gguf.constants import GGML_MAX_NAME, file_type_name, ggml_type_name


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array that was walked but not loaded (L-11: speed)."""

    element_type: str
    count: int
    offset: int  # file offset of the array's header


MetaValue: TypeAlias = "int | float | bool | str | SkippedArray | tuple[MetaValue, ...]"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int  # relative to the data section
    n_elements: int
    n_bytes: int | None  # None when the type is unknown (L-10)

    @property
    def type_name(self) -> str:
        return ggml_type_name(self.type_id)


M = TypeVar("M")  # a metadata value: parsed (MetaValue), or as JSON in a cache
Owner = TypeVar("Owner")
V = TypeVar("V")


@dataclass(frozen=True, kw_only=True)
class HeaderFacts(Generic[M]):
    """What a GGUF header states: one file's, or a whole model's (all its parts)."""

    location: str  # the path or URL it was read from
    version: int
    metadata: Mapping[str, M]
    value_types: Mapping[str, str]
    tensors: tuple[TensorInfo, ...]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GGUFHeader(HeaderFacts[MetaValue]):
    """One file's header, as parsed."""

    alignment: int
    data_offset: int  # where tensor data starts: the header's size
    file_size: int | None
    bytes_read: int


@dataclass(frozen=True)
class TypeStat:
    """One row of the tensor type histogram."""

    type_id: int
    name: str
    count: int
    n_bytes: int | None  # None for an unknown type: its block size is unknown
    known: bool


@dataclass(frozen=True)
class PartInfo:
    """One file of a split GGUF (or the only file)."""

    source: str
    split_no: int | None
    tensor_count: int
    tensor_bytes: int
    header_bytes: int
    file_size: int | None


_LAYER = re.compile(r"^blk\.(\d+)\.")
_MAX_PROBLEMS = 10  # per kind; the rest is summarised


def _int(meta: Mapping[str, MetaValue], key: str) -> int | None:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(meta: Mapping[str, MetaValue], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) else None


def _count(value: MetaValue | None) -> int | None:
    if isinstance(value, SkippedArray):
        return value.count
    if isinstance(value, tuple):
        return len(value)
    return None


def _int_or_layers(value: MetaValue | None) -> int | tuple[int, ...] | None:
    """A per-layer key (``head_count_kv``) may be one int or one per layer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return tuple(int(v) for v in value)  # type: ignore[arg-type]
    return None


@dataclass(frozen=True, kw_only=True)
class ModelFacts(HeaderFacts[M]):
    """A model's header facts, all parts of a split together (what a cache keeps)."""

    parts: tuple[PartInfo, ...]
    split_count: int | None
    notes: tuple[str, ...] = ()

    def model_facts(self) -> dict[str, Any]:
        """These fields by name, to build another kind of record of the same model."""
        return {f.name: getattr(self, f.name) for f in fields(ModelFacts)}


class Keyed(Generic[Owner, V]):
    """A read-only property that looks one key up with a method of its class:
    ``context_length = Keyed("context_length", _arch_int)``."""

    def __init__(self, key: str, look_up: Callable[[Owner, str], V]) -> None:
        self.key = key
        self.look_up = look_up

    @overload
    def __get__(self, obj: None, owner: type[Owner]) -> Keyed[Owner, V]: ...
    @overload
    def __get__(self, obj: Owner, owner: type[Owner]) -> V: ...
    def __get__(self, obj: Owner | None, owner: type[Owner]) -> V | Keyed[Owner, V]:
        return self if obj is None else self.look_up(obj, self.key)


@dataclass(frozen=True, kw_only=True)
class Inspection(ModelFacts[MetaValue]):
    """A model file as a loader sees it (all parts of a split together)."""

    layout: kv.AttentionLayout | None
    type_histogram: tuple[TypeStat, ...] = field(default=())

    # -- facts from metadata ---------------------------------------------

    @property
    def architecture(self) -> str | None:
        return _str(self.metadata, "general.architecture")

    def _arch_key(self, suffix: str) -> MetaValue | None:
        arch = self.architecture
        return None if arch is None else self.metadata.get(f"{arch}.{suffix}")

    def _arch_int(self, suffix: str) -> int | None:
        value = self._arch_key(suffix)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def name(self) -> str | None:
        return _str(self.metadata, "general.name")

    @property
    def file_type(self) -> str | None:
        value = _int(self.metadata, "general.file_type")
        return None if value is None else file_type_name(value)

    @property
    def parameter_count(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_bytes(self) -> int:
        """Bytes of tensors of known types (unknown ones have no known size)."""
        return sum(t.n_bytes or 0 for t in self.tensors)

    context_length = Keyed("context_length", _arch_int)
    block_count = Keyed("block_count", _arch_int)
    sliding_window = Keyed("attention.sliding_window", _arch_int)
    expert_count = Keyed("expert_count", _arch_int)
    expert_used_count = Keyed("expert_used_count", _arch_int)

    @property
    def nextn_layers(self) -> int:
        """Multi-token-prediction layers in the file (L-12); 0 if none."""
        return self._arch_int("nextn_predict_layers") or 0

    @property
    def head_count(self) -> int | tuple[int, ...] | None:
        return _int_or_layers(self._arch_key("attention.head_count"))

    @property
    def head_count_kv(self) -> int | tuple[int, ...] | None:
        value = _int_or_layers(self._arch_key("attention.head_count_kv"))
        return self.head_count if value is None else value

    def _head_length(self, suffix: str) -> int | None:
        explicit = self._arch_int(f"attention.{suffix}")
        if explicit is not None:
            return explicit
        embd, heads = self._arch_int("embedding_length"), self.head_count
        first = heads[0] if isinstance(heads, tuple) and heads else heads
        return embd // first if isinstance(first, int) and first and embd else None

    key_length = Keyed("key_length", _head_length)
    value_length = Keyed("value_length", _head_length)

    def _layers(self, kind: kv.LayerKind) -> tuple[int, ...]:
        return () if self.layout is None else self.layout.indices(kind)

    @property
    def swa_layers(self) -> tuple[int, ...]:
        return self._layers("swa")

    @property
    def full_attention_layers(self) -> tuple[int, ...]:
        return self._layers("full")

    @property
    def recurrent_layers(self) -> tuple[int, ...]:
        return self._layers("recurrent")

    @property
    def chat_template_length(self) -> int | None:
        """Characters of the default chat template; ``None`` without one (L-19)."""
        template = _str(self.metadata, "tokenizer.chat_template")
        return None if template is None else len(template)

    @property
    def named_chat_templates(self) -> tuple[str, ...]:
        prefix = "tokenizer.chat_template."
        return tuple(k[len(prefix) :] for k in self.metadata if k.startswith(prefix))

    @property
    def tokenizer_model(self) -> str | None:
        return _str(self.metadata, "tokenizer.ggml.model")

    @property
    def vocab_size(self) -> int | None:
        return _count(self.metadata.get("tokenizer.ggml.tokens"))

    @property
    def unknown_type_ids(self) -> tuple[int, ...]:
        return tuple(s.type_id for s in self.type_histogram if not s.known)

    def layer_bytes(self) -> dict[int, int]:
        """Bytes of each ``blk.N.`` block (tensors of known types)."""
        sizes: dict[int, int] = {}
        for t in self.tensors:
            match = _LAYER.match(t.name)
            if match:
                layer = int(match.group(1))
                sizes[layer] = sizes.get(layer, 0) + (t.n_bytes or 0)
        return dict(sorted(sizes.items()))

    # -- KV sizing (L-29) --------------------------------------------------

    def kv_bytes_per_token(
        self, cache_type_k: str = "f16", cache_type_v: str = "f16"
    ) -> kv.KVPerToken | None:
        if self.layout is None:
            return None
        return kv.kv_bytes_per_token(self.layout, cache_type_k, cache_type_v)

    def kv_bytes(self, ctx: int, **options: Any) -> kv.KVEstimate | None:
        """KV buffers for ``-c ctx``: :func:`kv.kv_bytes` with its options
        (``parallel``, cache types, ``n_ubatch``, ``unified``, ``swa_full``), on
        this file's layout (SWA layers capped at the window)."""
        if self.layout is None:
            return None
        return kv.kv_bytes(self.layout, ctx, **options)


def layout_problems(
    tensors: Sequence[TensorInfo], data_offset: int, alignment: int, file_size: int | None
) -> list[str]:
    """Offsets llama.cpp would refuse and tensors that do not fit in the file."""
    problems: list[str] = []
    offsets = 0
    beyond = 0
    expected: int | None = 0
    for t in tensors:
        if len(t.name) >= GGML_MAX_NAME and offsets < _MAX_PROBLEMS:
            offsets += 1
            problems.append(f"tensor name {t.name!r} is {len(t.name)} bytes; llama.cpp allows 63")
        if expected is not None and t.offset != expected and offsets < _MAX_PROBLEMS:
            offsets += 1
            problems.append(
                f"tensor {t.name!r} has data offset {t.offset}, expected {expected} "
                "(tensors must be packed in order, aligned)"
            )
        if t.n_bytes is None:
            expected = None  # unknown size: the next offset cannot be predicted
            continue
        if expected is not None:
            expected = t.offset + (t.n_bytes + alignment - 1) // alignment * alignment
        end = data_offset + t.offset + t.n_bytes
        if file_size is not None and end > file_size:
            beyond += 1
            if beyond <= _MAX_PROBLEMS:
                problems.append(
                    f"tensor {t.name!r} ends at byte {end} but the file has {file_size} bytes"
                )
    if beyond > _MAX_PROBLEMS:
        problems.append(f"... {beyond - _MAX_PROBLEMS} more tensors lie past the end of the file")
    if beyond:
        problems.append("the file is truncated (an incomplete download?): fetch it again")
    return problems


def json_value(value: object) -> Any:
    """A metadata value as JSON: skipped arrays as a count, NaN/inf as text."""
    if isinstance(value, SkippedArray):
        return {"array_of": value.element_type, "count": value.count, "loaded": False}
    if isinstance(value, tuple):
        return [json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
