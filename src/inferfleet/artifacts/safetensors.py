"""safetensors headers: the 8-byte length and the JSON header, never the tensor data (L-11).

A safetensors file is ``u64 little-endian N``, ``N`` bytes of JSON
(``{"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}``),
then the tensor bytes. :func:`read_header` reads exactly the first ``8 + N``
bytes through a byte source (a local file, or HTTP range requests: the
sources of :mod:`inferfleet.gguf.source`), and judges everything it reads as
hostile, the way the ``safetensors`` library itself does
(``safetensors/src/tensor.rs``, ``SafeTensors::read_metadata``):

- ``N`` is at most :data:`MAX_HEADER_BYTES` (the library's 100 MB limit) and
  lies inside the file;
- the header is a JSON object of tensors with a known ``dtype``, a ``shape``
  of non-negative integers and ``data_offsets`` ``[begin, end]`` whose length
  is exactly the tensor's bytes;
- the tensors cover the data buffer without gap or overlap, and the buffer
  ends where the file ends (when the source knows the file's size).

We parse the header ourselves rather than with ``safetensors.safe_open``
because that needs the whole file on disk; a Hub model's header is read by
range without downloading the weights.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from inferfleet.bounded import parse_json
from inferfleet.errors import FleetError
from inferfleet.gguf.errors import GGUFError
from inferfleet.gguf.source import ByteSource

MAX_HEADER_BYTES = 100_000_000  # safetensors' MAX_HEADER_SIZE
MAX_TENSORS = 1_000_000
MAX_DIMS = 16
MAX_HEADER_DEPTH = 8  # name -> {dtype, shape: [...], data_offsets: [...]}: 3 levels
# The first read: the length and, for most files, the whole header in one request.
FIRST_READ = 256 * 1024

# Bits per element of every dtype the safetensors format defines (safetensors Dtype).
DTYPE_BITS = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "C64": 64,
}


class SafetensorsError(FleetError, ValueError):
    """A safetensors header (or a model folder's index) is invalid, truncated or unreadable."""


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # offsets into the data buffer (after the header)
    end: int

    @property
    def n_bytes(self) -> int:
        return self.end - self.begin


class ByDtype:
    """Weights counted by dtype, over what :meth:`_weights` yields: (dtype, bytes) pairs."""

    def _weights(self) -> Iterator[tuple[str, int]]:
        raise NotImplementedError

    @property
    def weights_bytes(self) -> int:
        return sum(n for _, n in self._weights())

    @property
    def dtypes(self) -> dict[str, int]:
        """Bytes per dtype."""
        found: Counter[str] = Counter()
        for dtype, n in self._weights():
            found[dtype] += n
        return dict(found)


@dataclass(frozen=True)
class SafetensorsHeader(ByDtype):
    """One file's header: where it was read, its tensors, and the file's size."""

    location: str
    header_bytes: int  # N: the JSON's length
    file_size: int  # 8 + N + the data buffer
    tensors: tuple[Tensor, ...]
    metadata: dict[str, str]

    def _weights(self) -> Iterator[tuple[str, int]]:
        return ((t.dtype, t.n_bytes) for t in self.tensors)


def _fail(source: ByteSource, message: str, hint: str = "") -> SafetensorsError:
    return SafetensorsError(
        message,
        where=source.name,
        hint=hint or "the file is damaged or not a safetensors file: fetch and verify it again",
    )


def _natural(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read(source: ByteSource, start: int, end: int) -> bytes:
    try:
        return source.read(start, end)
    except GGUFError as exc:  # the byte sources speak GGUFError; here it is about this file
        raise SafetensorsError(exc.message, where=exc.where, hint=exc.hint) from None


def read_header(source: ByteSource) -> SafetensorsHeader:
    """The validated header of the safetensors file behind ``source`` (its first 8 + N bytes)."""
    first = _read(source, 0, FIRST_READ if source.remote else 8)
    if len(first) < 8:
        raise _fail(source, f"the file has {len(first)} bytes: too short for the 8-byte length")
    (n,) = struct.unpack("<Q", first[:8])
    size = source.size
    if n > MAX_HEADER_BYTES:
        raise _fail(source, f"header length {n:,} bytes is above the {MAX_HEADER_BYTES:,} limit")
    if size is not None and 8 + n > size:
        raise _fail(
            source, f"header length {n:,} bytes runs past the end of the file ({size:,} bytes)"
        )
    data = first[8 : 8 + n]
    if len(data) < n:
        data += _read(source, len(first), 8 + n)
    if len(data) < n:
        raise _fail(
            source, f"the file ends inside the header ({8 + len(data):,} of {8 + n:,} bytes)"
        )
    size = source.size  # a remote source knows it after the first answer
    parsed = parse_json(
        data,
        what="the header",
        where=source.name,
        error=SafetensorsError,
        hint="the file is damaged or not a safetensors file: fetch and verify it again",
        max_depth=MAX_HEADER_DEPTH,
    )
    if not isinstance(parsed, dict):
        raise _fail(source, f"the header is a JSON {type(parsed).__name__}, not an object")
    return _validate(source, n, size, parsed)


def _validate(
    source: ByteSource, n: int, size: int | None, parsed: dict[str, object]
) -> SafetensorsHeader:
    metadata_raw = parsed.pop("__metadata__", {})
    if not isinstance(metadata_raw, dict) or not all(
        isinstance(v, str) for v in metadata_raw.values()
    ):
        raise _fail(source, "__metadata__ must map names to strings")
    if len(parsed) > MAX_TENSORS:
        raise _fail(source, f"the header lists {len(parsed):,} tensors (limit {MAX_TENSORS:,})")
    tensors = [_tensor(source, name, info) for name, info in parsed.items()]
    tensors.sort(key=lambda t: (t.begin, t.end))
    at = 0
    for t in tensors:
        if t.begin != at:
            what = "overlaps the previous one" if t.begin < at else f"leaves a gap at {at:,}"
            raise _fail(source, f"tensor {t.name!r} starts at data offset {t.begin:,}: it {what}")
        at = t.end
    if size is not None and 8 + n + at != size:
        raise _fail(
            source,
            f"the tensors end at byte {8 + n + at:,} but the file has {size:,} bytes",
            hint="the file is truncated or has trailing bytes: fetch and verify it again",
        )
    return SafetensorsHeader(
        location=source.name,
        header_bytes=n,
        file_size=size if size is not None else 8 + n + at,
        tensors=tuple(tensors),
        metadata=dict(metadata_raw),
    )


def _tensor(source: ByteSource, name: str, info: object) -> Tensor:
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        keys = sorted(info) if isinstance(info, dict) else type(info).__name__
        raise _fail(source, f"tensor {name!r}: expected dtype, shape, data_offsets; got {keys}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise _fail(
            source,
            f"tensor {name!r} has dtype {str(dtype)[:40]!r}, which safetensors does not define",
            hint=f"known dtypes: {', '.join(DTYPE_BITS)}",
        )
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_natural(d) for d in shape):
        raise _fail(source, f"tensor {name!r}: shape must be up to {MAX_DIMS} non-negative ints")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_natural(o) for o in offsets):
        raise _fail(source, f"tensor {name!r}: data_offsets must be [begin, end] (non-negative)")
    begin, end = offsets
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8:
        raise _fail(source, f"tensor {name!r}: {shape} x {dtype} is not a whole number of bytes")
    if end < begin or end - begin != bits // 8:
        raise _fail(
            source,
            f"tensor {name!r}: data_offsets [{begin}, {end}] hold {end - begin} bytes, its shape "
            f"{shape} x {dtype} needs {bits // 8}",
        )
    return Tensor(name, dtype, tuple(shape), begin, end)


__all__ = [
    "DTYPE_BITS",
    "MAX_HEADER_BYTES",
    "SafetensorsError",
    "SafetensorsHeader",
    "Tensor",
    "read_header",
]
