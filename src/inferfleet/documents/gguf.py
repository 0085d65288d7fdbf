"""The document of ``gguf inspect``."""

from __future__ import annotations

from typing import (
    Any,
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


class KVPerTokenBytes(TypedDict):
    full: int
    swa: int
    nextn: int


class KVContext(TypedDict):
    ctx: int
    parallel: int
    n_ctx: int
    streams: int
    cells_full: int
    cells_swa: int
    full_bytes: int
    swa_bytes: int
    total_bytes: int


class KVSizing(TypedDict):
    cache_type_k: str
    cache_type_v: str
    per_token: KVPerTokenBytes
    context: NotRequired[KVContext]  # with --ctx


class Experts(TypedDict):
    count: int | None
    used: int | None


class ChatTemplateInfo(TypedDict):
    present: bool
    length: int | None
    named: list[str]


class TokenizerInfo(TypedDict):
    model: str | None
    vocab_size: int | None


class TypeCount(TypedDict):
    id: int
    name: str
    count: int
    bytes: int | None  # None: a type whose size is unknown
    known: bool


class LayerBytes(TypedDict):
    layer: int
    bytes: int


class SplitPart(TypedDict):
    source: str
    number: int | None
    tensor_count: int
    tensor_bytes: int
    header_bytes: int
    file_size: int | None


class SplitInfo(TypedDict):
    count: int
    parts: list[SplitPart]


class MetadataValue(TypedDict):
    type: str | None
    value: Any


class TensorRow(TypedDict):
    name: str
    shape: list[int]
    type: str
    type_id: int
    offset: int
    elements: int
    bytes: int | None


class GGUFInspectDocument(TypedDict):
    schema: Literal["inferfleet.gguf.inspect/v1"]
    location: str
    version: int
    architecture: str | None
    name: str | None
    file_type: str | None
    parameters: int
    tensor_count: int
    tensor_bytes: int
    context_length: int | None
    block_count: int | None
    nextn_layers: int
    head_count: int | list[int] | None
    head_count_kv: int | list[int] | None
    key_length: int | None
    value_length: int | None
    sliding_window: int | None
    swa_layers: list[int]
    full_attention_layers: list[int]
    recurrent_layers: list[int]
    experts: Experts
    chat_template: ChatTemplateInfo
    tokenizer: TokenizerInfo
    kv: KVSizing | None  # None: an architecture without a known KV layout
    types: list[TypeCount]
    layers: list[LayerBytes]
    split: SplitInfo | None
    metadata: dict[str, MetadataValue]
    problems: list[str]
    notes: list[str]
    tensors: NotRequired[list[TensorRow]]  # with --tensors
