"""GGUF format constants: value types, ggml tensor types and their sizes.

Spec data only, as gguf-py's ``constants.py`` keeps it. The ggml type table
follows ``ggml/include/ggml.h`` and ``ggml/src/ggml.c`` (``type_traits``)
through Q2_0 (id 42); an id missing here is not an error, it is reported by
number (L-10) because a fork may define it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

GGUF_MAGIC: Final = b"GGUF"
# Versions the reader parses. v1 used 32-bit counts and is refused, as
# llama.cpp has done since 2023.
SUPPORTED_VERSIONS: Final = (2, 3)
DEFAULT_ALIGNMENT: Final = 32  # GGUF_DEFAULT_ALIGNMENT
GGML_MAX_DIMS: Final = 4
GGML_MAX_NAME: Final = 64  # tensor names must be shorter (llama.cpp refuses otherwise)
INT64_MAX: Final = 2**63 - 1


class ValueType(IntEnum):
    """``gguf_type``: the type tag of a metadata value."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# Fixed-size value types: the struct that decodes one little-endian value.
SCALAR_STRUCTS: Final[dict[int, struct.Struct]] = {
    ValueType.UINT8: struct.Struct("<B"),
    ValueType.INT8: struct.Struct("<b"),
    ValueType.UINT16: struct.Struct("<H"),
    ValueType.INT16: struct.Struct("<h"),
    ValueType.UINT32: struct.Struct("<I"),
    ValueType.INT32: struct.Struct("<i"),
    ValueType.FLOAT32: struct.Struct("<f"),
    ValueType.BOOL: struct.Struct("<B"),
    ValueType.UINT64: struct.Struct("<Q"),
    ValueType.INT64: struct.Struct("<q"),
    ValueType.FLOAT64: struct.Struct("<d"),
}

VALUE_TYPE_NAMES: Final[dict[int, str]] = {int(t): t.name.lower() for t in ValueType}


@dataclass(frozen=True)
class GGMLType:
    """One ggml tensor type: ``block_size`` elements take ``type_size`` bytes."""

    id: int
    name: str
    block_size: int
    type_size: int

    def row_bytes(self, n_elements: int) -> int:
        """Bytes of ``n_elements`` values (a multiple of the block size)."""
        return n_elements // self.block_size * self.type_size


QK_K: Final = 256

# id -> (name, block size, bytes per block), from ggml.c type_traits.
_GGML_TYPES: Final[dict[int, tuple[str, int, int]]] = {
    0: ("f32", 1, 4),
    1: ("f16", 1, 2),
    2: ("q4_0", 32, 2 + 16),
    3: ("q4_1", 32, 2 + 2 + 16),
    6: ("q5_0", 32, 2 + 4 + 16),
    7: ("q5_1", 32, 2 + 2 + 4 + 16),
    8: ("q8_0", 32, 2 + 32),
    9: ("q8_1", 32, 2 + 2 + 32),
    10: ("q2_K", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4),
    11: ("q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    12: ("q4_K", QK_K, 2 + 2 + QK_K // 2 + 12),
    13: ("q5_K", QK_K, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    14: ("q6_K", QK_K, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    15: ("q8_K", QK_K, 4 + QK_K + QK_K // 8),
    16: ("iq2_xxs", QK_K, 2 + QK_K // 4),
    17: ("iq2_xs", QK_K, 2 + QK_K // 4 + QK_K // 32),
    18: ("iq3_xxs", QK_K, 2 + QK_K // 4 + QK_K // 8),
    19: ("iq1_s", QK_K, 2 + QK_K // 8 + QK_K // 16),
    20: ("iq4_nl", 32, 2 + 16),
    21: ("iq3_s", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    22: ("iq2_s", QK_K, 2 + QK_K // 4 + QK_K // 16),
    23: ("iq4_xs", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),
    24: ("i8", 1, 1),
    25: ("i16", 1, 2),
    26: ("i32", 1, 4),
    27: ("i64", 1, 8),
    28: ("f64", 1, 8),
    29: ("iq1_m", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    30: ("bf16", 1, 2),
    34: ("tq1_0", QK_K, 2 + 4 * 13),
    35: ("tq2_0", QK_K, 2 + 64),
    39: ("mxfp4", 32, 1 + 16),
    40: ("nvfp4", 64, 4 + 32),
    41: ("q1_0", 128, 2 + 16),
    42: ("q2_0", 64, 2 + 16),
}

GGML_TYPES: Final[dict[int, GGMLType]] = {
    type_id: GGMLType(type_id, name, block, size)
    for type_id, (name, block, size) in _GGML_TYPES.items()
}

# Ids ggml once had and removed: current loaders refuse them, so they are
# reported by name but, like unknown ids, carry no byte size.
REMOVED_GGML_TYPES: Final[dict[int, str]] = {
    4: "q4_2",
    5: "q4_3",
    31: "q4_0_4_4",
    32: "q4_0_4_8",
    33: "q4_0_8_8",
    36: "iq4_nl_4_4",
    37: "iq4_nl_4_8",
    38: "iq4_nl_8_8",
}

_BY_NAME: Final[dict[str, GGMLType]] = {t.name.lower(): t for t in GGML_TYPES.values()}


def ggml_type(type_id: int) -> GGMLType | None:
    """The known ggml type with this id, or ``None`` (removed or from a fork)."""
    return GGML_TYPES.get(type_id)


def ggml_type_name(type_id: int) -> str:
    """A printable name for any id: ``q4_K``, ``q4_2 (removed)``, ``type 103``."""
    known = GGML_TYPES.get(type_id)
    if known is not None:
        return known.name
    removed = REMOVED_GGML_TYPES.get(type_id)
    if removed is not None:
        return f"{removed} (removed)"
    return f"type {type_id}"


def ggml_type_by_name(name: str) -> GGMLType:
    """Look up a cache type the way llama-server's ``-ctk``/``-ctv`` spell it."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        raise ValueError(f"unknown ggml type {name!r}; known: {', '.join(sorted(_BY_NAME))}")
    return found


# llama_ftype (general.file_type): the quantisation mix the file was made with.
FILE_TYPES: Final[dict[int, str]] = {
    0: "ALL_F32",
    1: "MOSTLY_F16",
    2: "MOSTLY_Q4_0",
    3: "MOSTLY_Q4_1",
    7: "MOSTLY_Q8_0",
    8: "MOSTLY_Q5_0",
    9: "MOSTLY_Q5_1",
    10: "MOSTLY_Q2_K",
    11: "MOSTLY_Q3_K_S",
    12: "MOSTLY_Q3_K_M",
    13: "MOSTLY_Q3_K_L",
    14: "MOSTLY_Q4_K_S",
    15: "MOSTLY_Q4_K_M",
    16: "MOSTLY_Q5_K_S",
    17: "MOSTLY_Q5_K_M",
    18: "MOSTLY_Q6_K",
    19: "MOSTLY_IQ2_XXS",
    20: "MOSTLY_IQ2_XS",
    21: "MOSTLY_Q2_K_S",
    22: "MOSTLY_IQ3_XS",
    23: "MOSTLY_IQ3_XXS",
    24: "MOSTLY_IQ1_S",
    25: "MOSTLY_IQ4_NL",
    26: "MOSTLY_IQ3_S",
    27: "MOSTLY_IQ3_M",
    28: "MOSTLY_IQ2_S",
    29: "MOSTLY_IQ2_M",
    30: "MOSTLY_IQ4_XS",
    31: "MOSTLY_IQ1_M",
    32: "MOSTLY_BF16",
    36: "MOSTLY_TQ1_0",
    37: "MOSTLY_TQ2_0",
    38: "MOSTLY_MXFP4_MOE",
    39: "MOSTLY_NVFP4",
    40: "MOSTLY_Q1_0",
    41: "MOSTLY_Q2_0",
    1024: "GUESSED",
}


def file_type_name(value: int) -> str:
    return FILE_TYPES.get(value, f"file type {value}")
