"""Fast, hostile-input-safe GGUF header reading (L-10, L-11, L-12, L-29).

``inspect(path_or_url)`` reads only the header (never tensor data), combines
the parts of a split GGUF, and derives the facts sizing and checks need.
"""

from __future__ import annotations

from inferfleet.gguf.errors import GGUFError, GGUFNotFound
from inferfleet.gguf.kv import AttentionLayout, KVEstimate, KVPerToken, attention_layout
from inferfleet.gguf.model import (
    GGUFHeader,
    Inspection,
    PartInfo,
    SkippedArray,
    TensorInfo,
    TypeStat,
)
from inferfleet.gguf.reader import read_header, read_header_at, read_header_bytes
from inferfleet.gguf.split import (
    FragmentName,
    SplitName,
    inspect,
    parse_fragment_name,
    parse_split_name,
)

__all__ = [
    "AttentionLayout",
    "FragmentName",
    "GGUFError",
    "GGUFHeader",
    "GGUFNotFound",
    "Inspection",
    "KVEstimate",
    "KVPerToken",
    "PartInfo",
    "SkippedArray",
    "SplitName",
    "TensorInfo",
    "TypeStat",
    "attention_layout",
    "inspect",
    "parse_fragment_name",
    "parse_split_name",
    "read_header",
    "read_header_at",
    "read_header_bytes",
]
