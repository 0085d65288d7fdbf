"""Parse a GGUF header (metadata and tensor infos) from a byte source.

Hostile input is the normal case: every count and length is checked against
the bytes that remain in the file before anything is allocated or looped
over, so a claimed 10^12-element array or a 10^6-dimension tensor is a clean
:class:`GGUFError` naming the offset, never a MemoryError or a hang (style 7).

Speed (L-11): the header is read into one buffer that only grows, and
each read is sized from what the header has revealed so far (:meth:`_Parser.ensure`):
the first 256 KiB give the entry counts, a string array's average entry length
bounds its rest, so a local read stays within a few percent of the header's
size and a remote one takes two requests. Large arrays are skipped without
building Python objects: a string array is walked length by length (one
``unpack_from`` per entry, the loop's only work). Tensor data is never parsed
or kept.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Collection
from itertools import repeat
from operator import length_hint
from pathlib import Path

from inferfleet.gguf import constants as C
from inferfleet.gguf.errors import GGUFError
from inferfleet.gguf.model import GGUFHeader, MetaValue, SkippedArray, TensorInfo, layout_problems
from inferfleet.gguf.source import ByteSource, BytesSource, open_source

INITIAL_READ = 256 << 10
# Least a read beyond what the parser needs now: the next few entries' worth.
MIN_READ = 64 << 10
# Guesses of what one entry still to come costs, for sizing reads (not limits).
_EST_KV_BYTES = 64
_EST_TENSOR_BYTES = 96
# When the size is unknown (a stream without Content-Length) the header may
# not claim more than this; the largest real headers are a few tens of MiB.
MAX_UNKNOWN_HEADER = 256 << 20
SMALL_ARRAY_LIMIT = 1024  # arrays up to this many entries load by default
# Budgets on what the header may make us hold, whatever the file size claims
# (a sparse file of a few KB can claim a 1 GB string). A metadata string,
# key or tensor name is at most MAX_STRING; a chat template (the one large
# string real models carry: a few KB to ~100 KB) has its own bound.
MAX_STRING = 1 << 20
MAX_TEMPLATE_STRING = 8 << 20
_TEMPLATE_KEY = "tokenizer.chat_template"
# The header bytes read (metadata and tensor infos; the largest real ones are
# a few tens of MiB), and the bytes of string arrays decoded into Python
# objects when asked for (a vocabulary: a few MiB).
MAX_HEADER_BYTES = 64 << 20
MAX_LOADED_BYTES = 64 << 20
MAX_ARRAY_DEPTH = 8  # nested arrays deeper than this are refused

# Smallest encoding of one key/value pair (key length, type, one-byte value)
# and of one tensor info (name length, n_dims, type, offset): used to refuse
# absurd counts up front.
_MIN_KV_BYTES = 8 + 4 + 1
_MIN_TENSOR_BYTES = 8 + 4 + 4 + 8

_CORRUPT = "a download may be incomplete (fetch it again); otherwise the file is not valid GGUF"
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_U32_PAIR = struct.Struct("<IQ")  # array header (element type, count); tensor type, offset
_LITTLE_ENDIAN = sys.byteorder == "little"
_SHAPES = [struct.Struct(f"<{n}Q") for n in range(C.GGML_MAX_DIMS + 1)]


def _min_size(value_type: int) -> int:
    scalar = C.SCALAR_STRUCTS.get(value_type)
    if scalar is not None:
        return scalar.size
    return 8 if value_type == C.ValueType.STRING else 12


class _Parser:
    """One pass over the header; ``pos`` only moves forward."""

    def __init__(self, source: ByteSource, load: bool | Collection[str], small: int) -> None:
        self.source = source
        self.name = source.name
        self.data = bytearray(source.read(0, INITIAL_READ))
        self.limit = self._limit_after_read()
        self.pos = 0
        self.kv_left = 0  # entries not parsed yet: they size the next read
        self.tensors_left = 0
        self.values: dict[str, MetaValue] = {}
        self.load_all = load is True
        self.load_keys: Collection[str] = () if isinstance(load, bool) else load
        self.small = small
        self.loaded = 0  # bytes of string arrays decoded so far (MAX_LOADED_BYTES)

    # -- buffer ---------------------------------------------------------

    def _limit_after_read(self) -> int:
        size = self.source.size
        if size is not None:
            return size
        if len(self.data) < INITIAL_READ:  # short first read: that is the file
            return len(self.data)
        return MAX_UNKNOWN_HEADER

    def error(self, message: str, offset: int, hint: str = "") -> GGUFError:
        return GGUFError(message, source=self.name, offset=offset, hint=hint)

    def ensure(self, end: int, what: str, more: int = 0) -> None:
        """Make ``data`` cover ``[0, end)`` or raise a truncation error.

        A read goes past ``end`` by ``more``, the caller's estimate of the rest
        of the array it is in (at least :data:`MIN_READ`), which keeps a local
        read near the header's size. Over HTTP, where a round trip costs more
        than bytes, it also counts a guess per entry left, adds a quarter and
        never reads less than it has (the buffer at least doubles), so the
        rest of the header comes in one request.
        """
        if end <= len(self.data):
            return
        if end > MAX_HEADER_BYTES and end <= self.limit:
            raise self.error(
                f"the header needs more than {MAX_HEADER_BYTES >> 20} MiB for {what}; "
                "no real model's metadata is that large",
                offset=self.pos,
                hint=_CORRUPT,
            )
        if end <= self.limit:
            have = len(self.data)
            if self.source.remote:
                rest = self.kv_left * _EST_KV_BYTES + self.tensors_left * _EST_TENSOR_BYTES
                ahead = max(MIN_READ, have, (more + rest) * 5 // 4)
            else:  # another read costs little: the tensor infos come in MIN_READ steps
                ahead = max(MIN_READ, more)
            target = min(self.limit, end + ahead, MAX_HEADER_BYTES)
            chunk = self.source.read(have, target)
            self.data += chunk
            size = self.source.size
            if size is not None:
                self.limit = size
            elif len(chunk) < target - have:  # a stream of unknown length ended
                self.limit = len(self.data)
            if end <= len(self.data):
                return
        raise self.error(
            f"file is truncated: {what} needs bytes up to {end}, "
            f"the file has {min(self.limit, len(self.data))}",
            offset=self.pos,
            hint="the download is probably incomplete; fetch the file again",
        )

    def check_fits(self, nbytes: int, what: str) -> None:
        """Refuse a claimed length before allocating or looping over it."""
        remaining = self.limit - self.pos
        if nbytes > remaining:
            raise self.error(
                f"{what} claims {nbytes} bytes but only {remaining} remain: truncated or corrupt",
                offset=self.pos,
                hint=_CORRUPT,
            )

    # -- primitives -----------------------------------------------------

    def u32(self, what: str) -> int:
        self.ensure(self.pos + 4, what)
        (value,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def u64(self, what: str) -> int:
        self.ensure(self.pos + 8, what)
        (value,) = _U64.unpack_from(self.data, self.pos)
        self.pos += 8
        return int(value)

    def string(self, what: str, bound: int = MAX_STRING) -> str:
        length = self.u64(f"{what} length")
        self.check_fits(length, what)
        if length > bound:
            # Refused before a byte of it is read: its size, not the file's, is the limit.
            raise self.error(
                f"{what} claims {length:,} bytes; at most {bound:,} are read",
                offset=self.pos - 8,
                hint=_CORRUPT,
            )
        self.ensure(self.pos + length, what)
        text = self.data[self.pos : self.pos + length].decode("utf-8", "replace")
        self.pos += length
        return text

    # -- values ---------------------------------------------------------

    def value(self, value_type: int, key: str, depth: int) -> MetaValue:
        scalar = C.SCALAR_STRUCTS.get(value_type)
        if scalar is not None:
            self.ensure(self.pos + scalar.size, f"value of {key!r}")
            (raw,) = scalar.unpack_from(self.data, self.pos)
            self.pos += scalar.size
            if value_type == C.ValueType.BOOL:
                return bool(raw)
            return raw  # type: ignore[no-any-return]
        if value_type == C.ValueType.STRING:
            template = key == _TEMPLATE_KEY or key.startswith(_TEMPLATE_KEY + ".")
            bound = MAX_TEMPLATE_STRING if template else MAX_STRING
            return self.string(f"string value of {key!r}", bound)
        if value_type == C.ValueType.ARRAY:
            return self.array(key, depth)
        raise self.error(f"key {key!r} has unknown value type {value_type}", self.pos - 4)

    def _array_header(self, key: str, depth: int) -> tuple[int, int, int]:
        """Element type, count and start of an array, the count checked
        against the bytes left before anything loops over it."""
        start = self.pos
        if depth >= MAX_ARRAY_DEPTH:
            raise self.error(f"array {key!r} is nested deeper than {MAX_ARRAY_DEPTH}", start)
        self.ensure(start + 12, f"array header of {key!r}")
        elem_type, count = _U32_PAIR.unpack_from(self.data, start)
        self.pos += 12
        if elem_type not in C.VALUE_TYPE_NAMES:
            raise self.error(f"array {key!r} has unknown element type {elem_type}", start)
        self.check_fits(count * _min_size(elem_type), f"array {key!r} of {count} entries")
        return elem_type, count, start

    def array(self, key: str, depth: int, force: bool = False) -> MetaValue:
        elem_type, count, start = self._array_header(key, depth)
        load = force or self.load_all or count <= self.small or key in self.load_keys
        if not load:
            self.skip_array(elem_type, count, key, depth)
            return SkippedArray(C.VALUE_TYPE_NAMES[elem_type], count, start)
        scalar = C.SCALAR_STRUCTS.get(elem_type)
        if scalar is not None:
            nbytes = count * scalar.size
            self.ensure(self.pos + nbytes, f"array {key!r}")
            values = struct.unpack_from(f"<{count}{scalar.format[-1]}", self.data, self.pos)
            self.pos += nbytes
            if elem_type == C.ValueType.BOOL:
                return tuple(bool(v) for v in values)
            return values
        if elem_type == C.ValueType.STRING:
            return self._load_strings(count, key)
        # An array asked for is loaded whole, inner arrays included.
        return tuple(self.array(f"{key}[{i}]", depth + 1, True) for i in range(count))

    def skip_array(self, elem_type: int, count: int, key: str, depth: int) -> None:
        scalar = C.SCALAR_STRUCTS.get(elem_type)
        if scalar is not None:
            self.pos += count * scalar.size  # already checked against the file size
        elif elem_type == C.ValueType.STRING:
            self._skip_strings(count, key)
        else:
            for i in range(count):
                inner = f"{key}[{i}]"
                inner_type, inner_count, _ = self._array_header(inner, depth + 1)
                self.skip_array(inner_type, inner_count, inner, depth + 1)

    def _skip_strings(self, count: int, key: str) -> None:
        # The hot loop of a 262,144-entry vocabulary: no string objects and no
        # bounds test per entry. The walk itself refuses to read past the
        # buffer, so it stops there, the buffer grows by the estimated rest of
        # the array, and it resumes. A hostile length pushes ``pos`` past the
        # buffer and is caught the same way on the next entry, then refused
        # against the file's size.
        start = pos = self.pos
        left = count
        while left:
            pos, left = _walk_strings(self.data, pos, left)
            if not left:
                break
            if pos > self.limit - 8:
                raise self.error(
                    f"string array {key!r} runs past the end of the file: truncated or corrupt",
                    pos,
                    hint=_CORRUPT,
                )
            walked = count - left
            average = (pos - start) // walked if walked else 16
            self.pos = pos
            more = left * average * 21 // 20
            if self.source.remote and key == "tokenizer.ggml.tokens":
                more += self._vocabulary_companions(count, average)
            self.ensure(pos + 8, f"string array {key!r}", more=more)
        if pos > self.limit:
            raise self.error(
                f"the last entry of string array {key!r} runs past the end of the file: "
                "truncated or corrupt",
                self.pos,
                hint=_CORRUPT,
            )
        self.pos = pos

    def _load_strings(self, count: int, key: str) -> tuple[str, ...]:
        """A string array asked for: walked (and so checked) first, then
        decoded from the buffer with no test or message per entry."""
        start = self.pos
        self._skip_strings(count, key)
        self.ensure(self.pos, f"string array {key!r}")
        self.loaded += self.pos - start
        if self.loaded > MAX_LOADED_BYTES:
            raise self.error(
                f"string array {key!r} would bring the metadata loaded to {self.loaded:,} "
                f"bytes; at most {MAX_LOADED_BYTES:,} are loaded",
                start,
                hint="inspect without loading every array (the default skips large ones)",
            )
        data, unpack = self.data, _U64.unpack_from
        texts: list[str] = []
        pos = start
        for _ in repeat(None, count):
            end = pos + 8 + unpack(data, pos)[0]
            texts.append(data[pos + 8 : end].decode("utf-8", "replace"))
            pos = end
        return tuple(texts)

    def _vocabulary_companions(self, n_vocab: int, average: int) -> int:
        """Bytes llama.cpp's converters write after the token list, guessed
        so a remote read can take them in the same request: a score (f32)
        and a type (i32) per token, and for BPE (``gpt2``) vocabularies the
        merges, up to two per token, each about two tokens long."""
        guess = n_vocab * 8
        if self.values.get("tokenizer.ggml.model") == "gpt2":
            guess += 2 * n_vocab * max(2 * average - 7, 8)
        return guess

    # -- sections -------------------------------------------------------

    def preamble(self) -> tuple[int, int, int]:
        self.ensure(4, "the magic")
        if bytes(self.data[:4]) != C.GGUF_MAGIC:
            raise self.error(
                f"not a GGUF file (magic {bytes(self.data[:4])!r}, expected b'GGUF')",
                0,
                hint="if this is a .partNofM fragment, concatenate all fragments first (L-05)",
            )
        self.ensure(8, "the version")
        (version,) = _U32.unpack_from(self.data, 4)
        (swapped,) = struct.unpack_from(">I", self.data, 4)
        if version not in C.SUPPORTED_VERSIONS and swapped in (1, 2, 3):
            raise self.error(
                f"big-endian GGUF (version {swapped} byte-swapped) is not supported",
                4,
                hint="use the little-endian build of this model; llama.cpp on x86/ARM loads "
                "only little-endian files",
            )
        if version == 1:
            raise self.error(
                "GGUF v1 is not supported", 4, hint="re-convert with a current llama.cpp"
            )
        if version not in C.SUPPORTED_VERSIONS:
            raise self.error(f"unsupported GGUF version {version}", 4, hint="supported: 2 and 3")
        self.pos = 8
        n_tensors = self.u64("tensor count")
        n_kv = self.u64("metadata count")
        remaining = self.limit - self.pos
        if n_kv > remaining // _MIN_KV_BYTES:
            raise self.error(
                f"header claims {n_kv} metadata entries but the {remaining} bytes left can "
                f"hold at most {remaining // _MIN_KV_BYTES}: truncated or corrupt",
                16,
                hint=_CORRUPT,
            )
        if n_tensors > (remaining - n_kv * _MIN_KV_BYTES) // _MIN_TENSOR_BYTES:
            raise self.error(
                f"header claims {n_tensors} tensors but the rest of the file cannot hold "
                "their infos: truncated or corrupt",
                8,
                hint=_CORRUPT,
            )
        return version, n_tensors, n_kv

    def metadata(self, n_kv: int) -> tuple[dict[str, MetaValue], dict[str, str]]:
        values: dict[str, MetaValue] = {}
        types: dict[str, str] = {}
        self.values = values  # what is known so far sizes remote reads
        for i in range(n_kv):
            self.kv_left = n_kv - i
            at = self.pos
            key = self.string(f"key of metadata entry {i}")
            if not key:
                raise self.error(f"metadata entry {i} has an empty key", at)
            if key in values:
                raise self.error(
                    f"duplicate metadata key {key!r}", at, hint="llama.cpp refuses this file"
                )
            value_type = self.u32(f"type of {key!r}")
            type_name = C.VALUE_TYPE_NAMES.get(value_type, str(value_type))
            if value_type == C.ValueType.ARRAY:
                self.ensure(self.pos + 4, f"array header of {key!r}")
                (elem,) = _U32.unpack_from(self.data, self.pos)
                type_name = f"array[{C.VALUE_TYPE_NAMES.get(elem, str(elem))}]"
            values[key] = self.value(value_type, key, 0)
            types[key] = type_name
        self.kv_left = 0
        return values, types

    def alignment(self, values: dict[str, MetaValue], types: dict[str, str]) -> int:
        if "general.alignment" not in values:
            return C.DEFAULT_ALIGNMENT
        value = values["general.alignment"]
        if types["general.alignment"] != "uint32" or not isinstance(value, int):
            raise self.error(
                f"general.alignment must be a uint32, not {types['general.alignment']}", self.pos
            )
        if value <= 0 or value & (value - 1):
            raise self.error(
                f"invalid alignment {value}: must be a non-zero power of two", self.pos
            )
        return value

    def tensors(self, n_tensors: int) -> list[TensorInfo]:
        infos: list[TensorInfo] = []
        seen: set[str] = set()
        for i in range(n_tensors):
            self.tensors_left = n_tensors - i
            fast = self._buffered_tensor(seen)
            if fast is not None:
                infos.append(fast)
                continue
            at = self.pos
            name = self.string(f"name of tensor {i}")
            if name in seen:
                raise self.error(
                    f"duplicate tensor name {name!r}", at, hint="llama.cpp refuses this file"
                )
            seen.add(name)
            n_dims = self.u32(f"dimension count of tensor {name!r}")
            if n_dims > C.GGML_MAX_DIMS:
                raise self.error(
                    f"tensor {name!r} claims {n_dims} dimensions; "
                    f"ggml allows at most {C.GGML_MAX_DIMS}",
                    self.pos - 4,
                )
            self.ensure(self.pos + 8 * n_dims + 12, f"shape of tensor {name!r}")
            shape = struct.unpack_from(f"<{n_dims}Q", self.data, self.pos)
            self.pos += 8 * n_dims
            type_id = self.u32(f"type of tensor {name!r}")
            offset = self.u64(f"offset of tensor {name!r}")
            infos.append(self._tensor(name, shape, type_id, offset, at))
        return infos

    def _buffered_tensor(self, seen: set[str]) -> TensorInfo | None:
        """The next tensor info when all of it is in the buffer and its
        dimension count is valid, else ``None`` (and nothing consumed): the
        checked path above then reads it field by field and names what is
        wrong. Most of a 4,000-tensor header goes this way, with no message
        built per field."""
        data, at = self.data, self.pos
        size = len(data)
        if at + 8 > size:
            return None
        (length,) = _U64.unpack_from(data, at)
        pos = at + 8 + length
        if pos + 4 > size:
            return None
        (n_dims,) = _U32.unpack_from(data, pos)
        if n_dims > C.GGML_MAX_DIMS:
            return None
        end = pos + 16 + 8 * n_dims
        if end > size:
            return None
        name = data[at + 8 : pos].decode("utf-8", "replace")
        if name in seen:
            raise self.error(
                f"duplicate tensor name {name!r}", at, hint="llama.cpp refuses this file"
            )
        seen.add(name)
        shape = _SHAPES[n_dims].unpack_from(data, pos + 4)
        type_id, offset = _U32_PAIR.unpack_from(data, end - 12)
        self.pos = end
        return self._tensor(name, shape, type_id, offset, at)

    def _tensor(
        self, name: str, shape: tuple[int, ...], type_id: int, offset: int, at: int
    ) -> TensorInfo:
        n_elements = 1
        for dim in shape:
            if dim > C.INT64_MAX:
                raise self.error(f"tensor {name!r} has a negative dimension", at)
            n_elements *= dim
            if n_elements > C.INT64_MAX:
                raise self.error(f"tensor {name!r} has more than 2^63 elements", at)
        known = C.ggml_type(type_id)
        n_bytes: int | None = None
        if known is not None:
            if shape and shape[0] % known.block_size:
                raise self.error(
                    f"tensor {name!r} of type {known.name} has {shape[0]} elements per row, "
                    f"not a multiple of the block size {known.block_size}",
                    at,
                )
            n_bytes = known.row_bytes(n_elements)
        return TensorInfo(name, shape, type_id, offset, n_elements, n_bytes)


def _walk_strings(data: bytearray, pos: int, count: int) -> tuple[int, int]:
    """Walk up to ``count`` length-prefixed strings from ``pos`` while their
    lengths are in ``data``: the position reached and the entries left.

    Each length is read as one native uint64 from eight views of the buffer,
    one per offset modulo 8 (index ``pos >> 3`` of view ``pos & 7``), which
    costs 15% less per entry than ``Struct.unpack_from`` (no tuple); on a
    big-endian host the lengths are unpacked. A view refuses an index whose
    eight bytes are not all in the buffer (IndexError, also for a position
    past 2^63), as ``unpack_from`` does (struct.error, OverflowError).
    """
    entries = repeat(None, count)  # its length hint: the entries not walked yet
    if not _LITTLE_ENDIAN:
        unpack = _U64.unpack_from
        try:
            for _ in entries:
                pos += 8 + unpack(data, pos)[0]
        except (struct.error, OverflowError):
            return pos, length_hint(entries) + 1  # the entry at ``pos`` was not walked
        return pos, 0
    whole = memoryview(data)
    size = len(data)
    views = [whole[k : k + (size - k) // 8 * 8].cast("Q") for k in range(8)]
    try:
        for _ in entries:
            pos += 8 + views[pos & 7][pos >> 3]
    except IndexError:
        return pos, length_hint(entries) + 1
    finally:  # the buffer can grow again only once no view holds it
        for view in views:
            view.release()
        whole.release()
    return pos, 0


def read_header(
    source: ByteSource,
    *,
    load_arrays: bool | Collection[str] = False,
    small_array_limit: int = SMALL_ARRAY_LIMIT,
) -> GGUFHeader:
    """Parse the header from ``source`` (which the caller closes).

    Arrays with at most ``small_array_limit`` entries are loaded; larger ones
    become :class:`SkippedArray` unless ``load_arrays`` is ``True`` or names
    their key.
    """
    parser = _Parser(source, load_arrays, small_array_limit)
    version, n_tensors, n_kv = parser.preamble()
    parser.kv_left, parser.tensors_left = n_kv, n_tensors
    values, types = parser.metadata(n_kv)
    alignment = parser.alignment(values, types)
    tensors = parser.tensors(n_tensors)
    data_offset = (parser.pos + alignment - 1) // alignment * alignment
    size = source.size
    return GGUFHeader(
        location=source.name,
        version=version,
        metadata=values,
        value_types=types,
        tensors=tuple(tensors),
        alignment=alignment,
        data_offset=data_offset,
        file_size=size,
        bytes_read=len(parser.data),
        problems=tuple(layout_problems(tensors, data_offset, alignment, size)),
    )


def read_header_bytes(
    data: bytes, *, name: str = "<bytes>", load_arrays: bool | Collection[str] = False
) -> GGUFHeader:
    """Parse a header from bytes in memory."""
    return read_header(BytesSource(data, name), load_arrays=load_arrays)


def read_header_at(
    location: str | Path, *, load_arrays: bool | Collection[str] = False
) -> GGUFHeader:
    """Parse the header of one file or URL (no split aggregation)."""
    source = open_source(location)
    try:
        return read_header(source, load_arrays=load_arrays)
    finally:
        source.close()
