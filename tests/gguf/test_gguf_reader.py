"""The header reader on real bytes: every value type, and hostile files (L-10, L-11)."""

from __future__ import annotations

import math
import struct
import time
from pathlib import Path

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
    STRING,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
    GGUFBuilder,
    gemma3_like,
    pack_kv,
    pack_string,
    preamble,
)

from inferfleet.gguf import GGUFError, SkippedArray, read_header_at, read_header_bytes
from inferfleet.gguf.reader import SMALL_ARRAY_LIMIT

SCALARS = [
    (UINT8, 255, "uint8"),
    (INT8, -128, "int8"),
    (UINT16, 65535, "uint16"),
    (INT16, -32768, "int16"),
    (UINT32, 2**32 - 1, "uint32"),
    (INT32, -(2**31), "int32"),
    (FLOAT32, 1.5, "float32"),
    (BOOL, True, "bool"),
    (STRING, "héllo ✓", "string"),
    (UINT64, 2**64 - 1, "uint64"),
    (INT64, -(2**63), "int64"),
    (FLOAT64, math.pi, "float64"),
]


def _builder_with_every_type(version: int) -> GGUFBuilder:
    b = GGUFBuilder(version=version)
    for value_type, value, name in SCALARS:
        b.kv(f"test.{name}", value_type, value)
    b.kv("test.empty", ARRAY, (UINT32, []))
    b.kv("test.bools", ARRAY, (BOOL, [True, False, True]))
    b.kv("test.floats", ARRAY, (FLOAT64, [0.5, -2.0]))
    b.kv("test.strings", ARRAY, (STRING, ["a", "", "ü"]))
    b.kv(
        "test.nested",
        ARRAY,
        (ARRAY, [(UINT8, [1, 2]), (STRING, ["x", "y"]), (ARRAY, [(INT16, [-1])])]),
    )
    b.tensor("w", (64, 2), Q4_0).tensor("norm", (64,), F32)
    return b


@pytest.mark.parametrize("version", [2, 3])
def test_every_value_type_and_nested_arrays(version: int) -> None:
    header = read_header_bytes(_builder_with_every_type(version).build())
    assert header.version == version
    meta = header.metadata
    for _, value, name in SCALARS:
        got = meta[f"test.{name}"]
        assert got == value and type(got) is type(value), name
        assert header.value_types[f"test.{name}"] == name
    assert meta["test.empty"] == ()
    assert meta["test.bools"] == (True, False, True)
    assert meta["test.floats"] == (0.5, -2.0)
    assert meta["test.strings"] == ("a", "", "ü")
    assert meta["test.nested"] == ((1, 2), ("x", "y"), ((-1,),))
    assert header.value_types["test.nested"] == "array[array]"
    assert [t.name for t in header.tensors] == ["w", "norm"]
    assert header.tensors[0].shape == (64, 2)
    assert header.tensors[0].n_bytes == 4 * 18  # 128 q4_0 values = 4 blocks of 18 bytes
    assert header.tensors[1].offset == 96  # 72 bytes padded to 32
    assert header.data_offset % 32 == 0
    assert header.problems == ()


def test_large_arrays_are_skipped_unless_asked() -> None:
    n = SMALL_ARRAY_LIMIT + 1
    b = GGUFBuilder()
    b.kv("tokenizer.ggml.tokens", ARRAY, (STRING, [f"t{i}" for i in range(n)]))
    b.kv("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0] * n))
    b.kv("big.nested", ARRAY, (ARRAY, [(STRING, ["a", "b"])] * n))
    b.kv("after", UINT32, 7)
    data = b.build()
    header = read_header_bytes(data)
    tokens = header.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, SkippedArray) and tokens.count == n
    assert tokens.element_type == "string"
    assert isinstance(header.metadata["big.nested"], SkippedArray)
    assert header.metadata["after"] == 7  # the walk ended exactly where it should
    by_key = read_header_bytes(data, load_arrays={"tokenizer.ggml.tokens"})
    assert by_key.metadata["tokenizer.ggml.tokens"][-1] == f"t{n - 1}"  # type: ignore[index]
    assert isinstance(by_key.metadata["tokenizer.ggml.scores"], SkippedArray)
    everything = read_header_bytes(data, load_arrays=True)
    assert everything.metadata["big.nested"][0] == ("a", "b")  # type: ignore[index]


def test_big_endian_is_refused_clearly() -> None:
    data = GGUFBuilder(endian=">").kv("general.architecture", STRING, "llama").build()
    with pytest.raises(GGUFError, match="big-endian") as info:
        read_header_bytes(data)
    assert info.value.offset == 4


@pytest.mark.parametrize(
    ("version", "match"), [(1, "v1 is not supported"), (4, "unsupported GGUF version 4")]
)
def test_other_versions_are_refused(version: int, match: str) -> None:
    with pytest.raises(GGUFError, match=match):
        read_header_bytes(preamble(version, 0, 0))


def test_not_a_gguf_file() -> None:
    with pytest.raises(GGUFError, match="not a GGUF file") as info:
        read_header_bytes(b"PK\x03\x04" + b"\0" * 40)
    assert "concatenate" in info.value.hint  # a .partNofM fragment 2 looks like this


def _cut_points(data: bytes) -> dict[str, int]:
    tokens_at = data.index(b"tokenizer.ggml.tokens")
    first_tensor = data.index(b"token_embd.weight")
    return {
        "inside the magic": 2,
        "inside the counts": 20,
        "inside a key": 30,
        "inside the string array": tokens_at + 60,
        "inside a tensor name": first_tensor + 3,
        "inside a tensor shape": first_tensor + 25,
    }


@pytest.mark.parametrize("where", list(_cut_points(gemma3_like().build())))
def test_truncated_files_name_the_offset(where: str, tmp_path: Path) -> None:
    data = gemma3_like().build()
    cut = _cut_points(data)[where]
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:cut])
    with pytest.raises(GGUFError) as info:
        read_header_at(path)
    # The message, not str(): the tmp path itself contains "truncated".
    assert "truncated" in info.value.message
    assert info.value.offset is not None and info.value.offset <= cut
    assert str(path) in str(info.value)


def _fast_refusal(data: bytes, match: str) -> GGUFError:
    start = time.perf_counter()
    with pytest.raises(GGUFError, match=match) as info:
        read_header_bytes(data)
    assert time.perf_counter() - start < 0.5  # refused up front, never looped over
    return info.value


def test_absurd_array_count_is_refused() -> None:
    kv = pack_string("x") + struct.pack("<IIQ", ARRAY, UINT64, 10**12)
    err = _fast_refusal(preamble(3, 0, 1) + kv + b"\0" * 64, r"10\^?12|1000000000000 entries")
    assert err.offset == 24 + 9 + 4 + 12


def test_absurd_string_array_count_is_refused() -> None:
    kv = pack_string("x") + struct.pack("<IIQ", ARRAY, STRING, 10**12)
    _fast_refusal(preamble(3, 0, 1) + kv + b"\0" * 64, "1000000000000 entries")


def test_huge_string_length_is_refused() -> None:
    kv = pack_string("x") + struct.pack("<IQ", STRING, 2**62)
    err = _fast_refusal(preamble(3, 0, 1) + kv, "claims 4611686018427387904 bytes")
    assert err.offset == 24 + 9 + 4 + 8


def test_huge_length_inside_a_skipped_string_array() -> None:
    n = SMALL_ARRAY_LIMIT + 10
    entries = [pack_string("ok")] * 5 + [struct.pack("<Q", 2**60)] + [pack_string("z")] * (n - 6)
    kv = pack_string("tok") + struct.pack("<IIQ", ARRAY, STRING, n) + b"".join(entries)
    _fast_refusal(preamble(3, 0, 1) + kv, "past the end of the file")


def test_a_million_dimensions_is_refused() -> None:
    tensor = pack_string("t") + struct.pack("<I", 10**6) + b"\0" * 64
    err = _fast_refusal(preamble(3, 1, 0) + tensor, "1000000 dimensions; ggml allows at most 4")
    assert err.offset == 24 + 9


@pytest.mark.parametrize(("n_tensors", "n_kv"), [(0, 10**15), (10**15, 0), (2**64 - 1, 1)])
def test_absurd_counts_are_refused(n_tensors: int, n_kv: int) -> None:
    _fast_refusal(preamble(3, n_tensors, n_kv) + b"\0" * 100, "header claims")


def test_overflowing_shape_is_refused() -> None:
    tensor = pack_string("t") + struct.pack("<I3QIQ", 3, 2**40, 2**40, 2**40, F32, 0)
    _fast_refusal(preamble(3, 1, 0) + tensor, "more than 2\\^63 elements")


def test_unknown_value_type_and_element_type() -> None:
    bad_value = preamble(3, 0, 1) + pack_string("k") + struct.pack("<IQ", 99, 0)
    _fast_refusal(bad_value, "unknown value type 99")
    bad_elem = preamble(3, 0, 1) + pack_string("k") + struct.pack("<IIQ", ARRAY, 42, 1) + b"\0" * 8
    _fast_refusal(bad_elem, "unknown element type 42")


def test_nesting_depth_is_bounded() -> None:
    value: tuple[int, object] = (UINT8, [1])
    for _ in range(20):
        value = (ARRAY, [value])
    data = preamble(3, 0, 1) + pack_kv("deep", ARRAY, value)
    _fast_refusal(data, "nested deeper than 8")


@pytest.mark.parametrize("alignment", [0, 3, 48])
def test_alignment_must_be_a_power_of_two(alignment: int) -> None:
    data = GGUFBuilder().kv("general.alignment", UINT32, alignment).build()
    with pytest.raises(GGUFError, match="must be a non-zero power of two"):
        read_header_bytes(data)


def test_alignment_must_be_uint32_and_is_honoured() -> None:
    with pytest.raises(GGUFError, match="must be a uint32"):
        read_header_bytes(GGUFBuilder().kv("general.alignment", UINT64, 64).build())
    b = GGUFBuilder(alignment=64).kv("general.alignment", UINT32, 64)
    header = read_header_bytes(b.tensor("a", (3,), F32).tensor("b", (5,), F32).build())
    assert header.alignment == 64 and header.data_offset % 64 == 0
    assert [t.offset for t in header.tensors] == [0, 64]
    assert header.problems == ()


def test_duplicates_are_refused() -> None:
    with pytest.raises(GGUFError, match="duplicate metadata key 'a'"):
        read_header_bytes(GGUFBuilder().kv("a", UINT8, 1).kv("a", UINT8, 2).build())
    with pytest.raises(GGUFError, match="duplicate tensor name 'w'"):
        read_header_bytes(GGUFBuilder().tensor("w", (4,)).tensor("w", (4,)).build())


def test_rows_must_be_whole_blocks() -> None:
    with pytest.raises(GGUFError, match="not a multiple of the block size 32"):
        read_header_bytes(GGUFBuilder().tensor("w", (33, 2), Q4_0, n_bytes=64).build())


def test_tensor_past_the_end_of_a_local_file_is_reported(tmp_path: Path) -> None:
    data = gemma3_like().build()
    path = tmp_path / "short.gguf"
    path.write_bytes(data[:-100])  # an incomplete download: header intact, data short
    header = read_header_at(path)
    assert any("ends at byte" in p for p in header.problems)
    assert any("truncated" in p for p in header.problems)


def test_misplaced_offsets_are_reported() -> None:
    b = GGUFBuilder().tensor("a", (8,), F32).tensor("b", (8,), F32, offset=8)
    header = read_header_bytes(b.build())
    assert any("'b' has data offset 8, expected 32" in p for p in header.problems)


def test_unknown_tensor_type_is_kept_by_number() -> None:
    b = GGUFBuilder().tensor("w", (64, 4), 103, n_bytes=100).tensor("r", (8,), 31, n_bytes=32)
    header = read_header_bytes(b.build())
    weird, removed = header.tensors
    assert weird.type_id == 103 and weird.n_bytes is None and weird.type_name == "type 103"
    assert weird.n_elements == 256
    assert removed.type_name == "q4_0_4_4 (removed)" and removed.n_bytes is None


def test_invalid_utf8_does_not_crash() -> None:
    data = preamble(3, 0, 1) + pack_string(b"bad\xff") + struct.pack("<I", STRING)
    data += pack_string(b"\xfe\xfe")
    header = read_header_bytes(data)
    assert header.metadata["bad\ufffd"] == "\ufffd\ufffd"


def test_truncated_inside_a_skipped_string_array(tmp_path: Path) -> None:
    data = gemma3_like(n_vocab=SMALL_ARRAY_LIMIT * 4).build()
    # Far enough in that 8 bytes per claimed entry still fit: the walk finds the end.
    cut = data.index(b"tokenizer.ggml.tokens") + 40_000
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:cut])
    with pytest.raises(GGUFError) as info:
        read_header_at(path)
    assert "truncated" in info.value.message
    assert info.value.offset is not None and cut - 100 < info.value.offset <= cut


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="no such file"):
        read_header_at(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="is a directory"):
        read_header_at(tmp_path)


def test_a_local_read_stays_near_the_header_size(tmp_path: Path) -> None:
    # A 300,000-entry vocabulary (about 4.5 MiB) with its scores, in front of
    # 16 MiB of data: the walk crosses several reads, each sized from the
    # average entry so far, and the bytes read stay within 1.25x the header.
    b = gemma3_like(n_vocab=8)
    b.kv("tokenizer.ggml.merges", ARRAY, (STRING, [f"m{i:06d}" for i in range(300_000)]))
    b.kv("tokenizer.ggml.scores2", ARRAY, (FLOAT32, [0.5] * 300_000))
    b.kv("after", UINT32, 7)
    path = tmp_path / "big.gguf"
    path.write_bytes(b.build() + bytes(16 << 20))
    header = read_header_at(path)
    merges = header.metadata["tokenizer.ggml.merges"]
    assert isinstance(merges, SkippedArray) and merges.count == 300_000
    assert header.metadata["after"] == 7  # the walk resumed exactly across reads
    assert header.data_offset <= header.bytes_read <= 1.25 * header.data_offset


@pytest.mark.parametrize("length", [2**62, 2**64 - 1])
def test_huge_length_after_the_first_read(length: int) -> None:
    # Past the first read, in a later buffer, and (2^64 - 1) past what a
    # position can index: refused against the file's size all the same.
    n = 40_000
    entries = [pack_string("abcdefgh")] * 30_000 + [struct.pack("<Q", length)]
    entries += [pack_string("z")] * (n - len(entries))
    kv = pack_string("tok") + struct.pack("<IIQ", ARRAY, STRING, n) + b"".join(entries)
    _fast_refusal(preamble(3, 0, 1) + kv, "past the end of the file")


def test_a_loaded_string_array_is_checked_like_a_skipped_one(tmp_path: Path) -> None:
    # Loading walks the array first (the same checks), then decodes each
    # entry; across several reads the tokens come back whole and in order.
    tokens = [f"tok{i}-\u00e9" for i in range(60_000)]
    b = GGUFBuilder().kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens))
    data = b.kv("after", UINT32, 7).build()
    path = tmp_path / "v.gguf"
    path.write_bytes(data)
    header = read_header_at(path, load_arrays={"tokenizer.ggml.tokens"})
    assert header.metadata["tokenizer.ggml.tokens"] == tuple(tokens)
    assert header.metadata["after"] == 7
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(GGUFError, match="truncated"):
        read_header_at(path, load_arrays=True)
