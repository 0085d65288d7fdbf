"""Split a GGUF file the way llama.cpp's ``llama-gguf-split`` does, without copying data.

The split layout (llama.cpp ``tools/gguf-split``): every part is a GGUF
file; part 1 carries all of the original's metadata plus ``split.no``
(u16, 0-based), ``split.count`` (u16) and ``split.tensors.count`` (i32);
the other parts carry only those three keys. Each part holds a run of the
original's tensors, with offsets relative to its own data section.

Parts are returned as segments (new header bytes + slices of the original
file) so a 253 MB model is "split" in milliseconds and served by sendfile.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT16, INT32, UINT32 = 8, 9, 2, 5, 4
Segment = bytes | tuple[Path, int, int]


@dataclass(frozen=True)
class Tensor:
    name: bytes
    info_without_offset: bytes  # name, n_dims, dims, type, as written
    offset: int  # relative to the data section


@dataclass(frozen=True)
class Layout:
    version: int
    kvs: list[tuple[str, bytes]]  # key and the raw key+type+value bytes
    tensors: list[Tensor]
    alignment: int
    data_start: int
    file_size: int


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("GGUF metadata runs past the part read")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def string(self) -> bytes:
        return self.take(self.u64())

    def skip_value(self, kind: int) -> None:
        if kind in _SCALAR:
            self.pos += _SCALAR[kind]
        elif kind == STRING:
            length = self.u64()  # read before adding: u64() moves pos
            self.pos += length
        elif kind == ARRAY:
            element, count = self.u32(), self.u64()
            if element in _SCALAR:
                self.pos += _SCALAR[element] * count
            else:
                for _ in range(count):
                    self.skip_value(element)
        else:
            raise ValueError(f"unknown GGUF value type {kind}")


def read_layout(path: Path) -> Layout:
    with path.open("rb") as handle:
        reader = _Reader(handle.read(64 << 20))  # the metadata lives in the first MiBs
    if reader.take(4) != GGUF_MAGIC:
        raise ValueError(f"{path} is not a GGUF file")
    version = reader.u32()
    n_tensors, n_kv = reader.u64(), reader.u64()
    kvs: list[tuple[str, bytes]] = []
    alignment = 32
    for _ in range(n_kv):
        start = reader.pos
        key = reader.string().decode()
        kind = reader.u32()
        value_at = reader.pos
        reader.skip_value(kind)
        if key == "general.alignment" and kind == UINT32:
            alignment = int(struct.unpack("<I", reader.data[value_at : value_at + 4])[0])
        kvs.append((key, reader.data[start : reader.pos]))
    tensors: list[Tensor] = []
    for _ in range(n_tensors):
        start = reader.pos
        name = reader.string()
        dims = reader.u32()
        reader.pos += 8 * dims + 4
        info = reader.data[start : reader.pos]
        tensors.append(Tensor(name, info, reader.u64()))
    data_start = _align(reader.pos, alignment)
    offsets = [t.offset for t in tensors]
    if offsets != sorted(offsets):
        raise ValueError("tensors are not stored in info order")
    return Layout(version, kvs, tensors, alignment, data_start, path.stat().st_size)


def split_name(prefix: str, number: int, count: int) -> str:
    """``llama_split_path``: ``<prefix>-00001-of-00003.gguf``."""
    return f"{prefix}-{number:05d}-of-{count:05d}.gguf"


def split_segments(path: Path, count: int) -> list[list[Segment]]:
    """``count`` parts of ``path``, each a list of segments."""
    layout = read_layout(path)
    data_size = layout.file_size - layout.data_start
    spans = [
        (layout.tensors[i + 1].offset if i + 1 < len(layout.tensors) else data_size) - t.offset
        for i, t in enumerate(layout.tensors)
    ]
    # Like --split-max-tensors: runs of equal tensor counts.
    per_part = -(-len(spans) // count)
    groups = [list(range(i, min(i + per_part, len(spans)))) for i in range(0, len(spans), per_part)]
    if len(groups) != count:
        raise ValueError(f"cannot split {len(spans)} tensors into {count} non-empty parts")
    parts: list[list[Segment]] = []
    for number, group in enumerate(groups):
        kv = [
            _kv_u16("split.no", number),
            _kv_u16("split.count", count),
            _kv_i32("split.tensors.count", len(layout.tensors)),
        ]
        if number == 0:
            kv = [raw for _key, raw in layout.kvs] + kv
        elif layout.alignment != 32:
            kv += [raw for key, raw in layout.kvs if key == "general.alignment"]
        header = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(group), len(kv)))
        for raw in kv:
            header += raw
        offset = 0
        for index in group:
            header += layout.tensors[index].info_without_offset + struct.pack("<Q", offset)
            offset += spans[index]
        header += b"\0" * (_align(len(header), layout.alignment) - len(header))
        segments: list[Segment] = [bytes(header)]
        first = layout.tensors[group[0]].offset
        segments.append((path, layout.data_start + first, sum(spans[i] for i in group)))
        parts.append(segments)
    return parts


def read_split_keys(data: bytes) -> dict[str, int]:
    """The ``split.*`` values of a GGUF header held in ``data``."""
    reader = _Reader(data)
    if reader.take(4) != GGUF_MAGIC:
        raise ValueError("not a GGUF file")
    reader.u32()
    reader.u64()
    n_kv = reader.u64()
    found: dict[str, int] = {}
    for _ in range(n_kv):
        key = reader.string().decode()
        kind = reader.u32()
        at = reader.pos
        reader.skip_value(kind)
        if key.startswith("split.") and kind in (UINT16, INT32):
            fmt = "<H" if kind == UINT16 else "<i"
            found[key] = int(struct.unpack(fmt, reader.data[at : reader.pos])[0])
    return found


def _kv_u16(key: str, value: int) -> bytes:
    raw = key.encode()
    return struct.pack("<Q", len(raw)) + raw + struct.pack("<IH", UINT16, value)


def _kv_i32(key: str, value: int) -> bytes:
    raw = key.encode()
    return struct.pack("<Q", len(raw)) + raw + struct.pack("<Ii", INT32, value)


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment
