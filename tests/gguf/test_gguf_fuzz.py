"""Fuzzing the GGUF reader (bounded; ``benchmarks/gguf_fuzz.py`` runs 100,000+ cases).

Inputs: the real model's header (its first MiB as is, and the whole header
re-encoded with the vocabulary cut to 64 entries so every tensor info is in
reach), and synthetic files from the builder; each mutated by overwriting,
truncating, inserting, or planting extreme counts. Whatever the bytes, the
reader and what is derived from its result (attention layout, KV bytes,
budget shape) raise nothing but :class:`GGUFError` (or the budget's
:class:`BudgetError` for a header that cannot be sized).
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

import pytest
from fixtures.gguf_builder import (
    ARRAY,
    BOOL,
    F32,
    FLOAT32,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    Q4_0,
    Q8_0,
    STRING,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
    GGUFBuilder,
    gemma3_like,
)
from helpers.real_model import GEMMA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfleet.budget import BudgetError, ContextShape, context_memory, model_shape
from inferfleet.gguf import GGUFError, SkippedArray, read_header_at, read_header_bytes
from inferfleet.gguf.split import build_inspection

TYPE_IDS = {
    "uint8": UINT8, "int8": INT8, "uint16": UINT16, "int16": INT16, "uint32": UINT32,
    "int32": INT32, "float32": FLOAT32, "bool": BOOL, "string": STRING, "uint64": UINT64,
    "int64": INT64, "float64": FLOAT64,
}  # fmt: skip
_DUMMY: dict[int, Any] = {STRING: "t", BOOL: False, FLOAT32: 0.0, FLOAT64: 0.0}
EXTREMES = [0, 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1, 10**12, 1 << 40]


@cache
def real_prefix() -> bytes:
    """The real model's first MiB: metadata, then the vocabulary cut off mid-array."""
    with GEMMA.open("rb") as handle:
        return handle.read(1 << 20)


@cache
def real_header_small(keep: int = 64) -> bytes:
    """The real header re-encoded, large arrays cut to ``keep`` entries: every key
    and all 236 tensor infos of the real model in a few tens of KiB."""
    header = read_header_at(GEMMA)
    b = GGUFBuilder(version=header.version, alignment=header.alignment)
    for key, value in header.metadata.items():
        kind = header.value_types[key]
        if kind.startswith("array["):
            elem = TYPE_IDS[kind[6:-1]]
            items = (
                [_DUMMY.get(elem, 0)] * min(value.count, keep)
                if isinstance(value, SkippedArray)
                else list(value)  # type: ignore[arg-type]
            )
            b.kv(key, ARRAY, (elem, items))
        else:
            b.kv(key, TYPE_IDS[kind], value)
    for t in header.tensors:
        b.tensor(t.name, t.shape, t.type_id, n_bytes=t.n_bytes or 0, offset=t.offset)
    head: bytes = b.header()
    return head


def mutate(data: bytes, ops: list[tuple[str, int, bytes | int]]) -> bytes:
    """Apply mutations: overwrite, truncate, insert, delete, or plant a u64/u32."""
    out = bytearray(data)
    for op, where, arg in ops:
        pos = where % (len(out) + 1)
        if op == "overwrite" and isinstance(arg, bytes):
            out[pos : pos + len(arg)] = arg
        elif op == "truncate":
            del out[pos:]
        elif op == "insert" and isinstance(arg, bytes):
            out[pos:pos] = arg
        elif op == "delete" and isinstance(arg, int):
            del out[pos : pos + arg % 64]
        elif op == "u64" and isinstance(arg, int):
            out[pos : pos + 8] = struct.pack("<Q", arg % 2**64)
        elif op == "u32" and isinstance(arg, int):
            out[pos : pos + 4] = struct.pack("<I", arg % 2**32)
    return bytes(out)


def exercise(data: bytes) -> None:
    """Everything a hostile header reaches: parse, inspection, layout, KV, budget shape."""
    try:
        header = read_header_bytes(data, name="<fuzz>")
        result = build_inspection("<fuzz>", [header])
        result.layer_bytes()
        _ = (result.vocab_size, result.head_count_kv, result.key_length, result.file_type)
        if result.layout is not None:
            result.kv_bytes_per_token("q8_0", "q4_0")
            result.kv_bytes(8192, parallel=2)
        shape = model_shape(result)
        context_memory(shape, ContextShape(4096, 2))
    except (GGUFError, BudgetError):
        return


def _synthetic() -> st.SearchStrategy[bytes]:
    scalar = st.sampled_from([UINT8, INT32, UINT32, UINT64, FLOAT32, BOOL, STRING])
    value = {
        UINT8: st.integers(0, 255), INT32: st.integers(-(2**31), 2**31 - 1),
        UINT32: st.integers(0, 2**32 - 1), UINT64: st.integers(0, 2**64 - 1),
        FLOAT32: st.floats(width=32), BOOL: st.booleans(), STRING: st.text(max_size=8),
    }  # fmt: skip
    arch = st.sampled_from(["gemma3", "llama", "qwen35", "mamba", "deepseek2", "x"])
    keys = st.sampled_from(
        [
            "block_count", "attention.head_count", "attention.head_count_kv",
            "attention.key_length", "attention.value_length", "attention.sliding_window",
            "attention.sliding_window_pattern", "embedding_length", "nextn_predict_layers",
            "ssm.inner_size", "ssm.state_size", "ssm.conv_kernel", "full_attention_interval",
            "attention.key_length_mla", "feed_forward_length", "context_length",
        ]
    )  # fmt: skip

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        name = draw(arch)
        b = GGUFBuilder(version=draw(st.sampled_from([2, 3])))
        b.kv("general.architecture", STRING, name)
        for key in draw(st.lists(keys, max_size=10, unique=True)):
            if draw(st.booleans()):
                elem = draw(scalar)
                b.kv(f"{name}.{key}", ARRAY, (elem, draw(st.lists(value[elem], max_size=6))))
            else:
                kind = draw(scalar)
                b.kv(f"{name}.{key}", kind, draw(value[kind]))
        for i in range(draw(st.integers(0, 6))):
            dims = draw(st.lists(st.sampled_from([1, 32, 64, 256]), min_size=1, max_size=4))
            b.tensor(f"blk.{i}.w", tuple(dims), draw(st.sampled_from([F32, Q4_0, Q8_0])))
        built: bytes = b.build(data=False)
        return built

    return build()


_ops = st.lists(
    st.tuples(
        st.sampled_from(["overwrite", "truncate", "insert", "delete", "u64", "u32"]),
        st.integers(0, 1 << 22),
        st.one_of(st.binary(min_size=1, max_size=8), st.sampled_from(EXTREMES)),
    ),
    max_size=4,
)
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,  # no .hypothesis folder in the checkout
    suppress_health_check=[HealthCheck.too_slow],
)
needs_gemma = pytest.mark.usefixtures("gemma_file")  # assembled once per machine


@needs_gemma
def test_the_re_encoded_real_header_parses_as_the_real_one() -> None:
    small = read_header_bytes(real_header_small())
    real = read_header_at(GEMMA)
    assert [t.name for t in small.tensors] == [t.name for t in real.tensors]
    assert set(small.metadata) == set(real.metadata)


@needs_gemma
@FUZZ
@given(ops=_ops, near=st.integers(0, 1 << 16))
def test_mutated_real_header_prefix(ops: list[tuple[str, int, bytes | int]], near: int) -> None:
    # Most interesting bytes are in the first 64 KiB: the counts, keys and array headers.
    exercise(mutate(real_prefix(), [(op, where % (near + 1), arg) for op, where, arg in ops]))


@needs_gemma
@FUZZ
@given(ops=_ops)
def test_mutated_real_header_with_every_tensor(ops: list[tuple[str, int, bytes | int]]) -> None:
    exercise(mutate(real_header_small(), ops))


@FUZZ
@given(data=_synthetic(), ops=_ops)
def test_mutated_synthetic_headers(data: bytes, ops: list[tuple[str, int, bytes | int]]) -> None:
    exercise(mutate(data, ops))


@FUZZ
@given(ops=_ops)
def test_mutated_gemma3_like_header(ops: list[tuple[str, int, bytes | int]]) -> None:
    exercise(mutate(gemma3_like().build(), ops))


def test_a_claimed_four_billion_layers_is_no_memory_error() -> None:
    # Found by the fuzzer: block_count 0xfffffffe used to size per-layer lists
    # (a MemoryError after minutes of swapping). llama.cpp loads at most 512 blocks.
    b = GGUFBuilder(version=2).kv("general.architecture", STRING, "gemma3")
    b.kv("gemma3.block_count", UINT32, 0xFFFFFFFE)
    result = build_inspection("<huge>", [read_header_bytes(b.build())])
    assert result.layout is None and result.block_count == 0xFFFFFFFE
    with pytest.raises(BudgetError, match="claims 4294967294 blocks; llama.cpp loads at most 512"):
        model_shape(result)
