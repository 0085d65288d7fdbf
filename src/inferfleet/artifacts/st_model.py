"""A safetensors model (a vLLM folder): its ``config.json`` and its weight files' headers.

The weight files are ``model.safetensors``, or the shards that
``model.safetensors.index.json`` maps tensors to (each read once); without
an index, every declared ``*.safetensors`` file at the top of the folder.
Only the config (bounded), the index (bounded) and each file's 8 + N header
bytes are read, through a :class:`Reader` that is either this machine's
folder or the Hub by range requests (:mod:`inferfleet.hub.headers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from inferfleet.artifacts.hfconfig import MAX_CONFIG_BYTES, AttentionConfig, parse_config
from inferfleet.artifacts.safetensors import (
    ByDtype,
    SafetensorsError,
    SafetensorsHeader,
    read_header,
)
from inferfleet.bounded import parse_json
from inferfleet.gguf.errors import GGUFError
from inferfleet.gguf.source import ByteSource, FileSource

INDEX = "model.safetensors.index.json"
CONFIG = "config.json"
MAX_INDEX_BYTES = 64 * 1024 * 1024
MAX_SHARDS = 10_000


@dataclass(frozen=True)
class WeightsFile:
    """One weight file's header facts (what budget and the cache keep)."""

    path: str
    file_size: int
    header_bytes: int
    tensors: int
    dtypes: dict[str, int]  # bytes per safetensors dtype

    @property
    def weights_bytes(self) -> int:
        return sum(self.dtypes.values())

    @classmethod
    def of(cls, path: str, header: SafetensorsHeader) -> WeightsFile:
        return cls(path, header.file_size, header.header_bytes, len(header.tensors), header.dtypes)


@dataclass(frozen=True)
class SafetensorsModel(ByDtype):
    location: str
    config: AttentionConfig
    files: tuple[WeightsFile, ...]
    notes: tuple[str, ...] = field(default=())

    def _weights(self) -> Iterator[tuple[str, int]]:
        return (pair for f in self.files for pair in f.dtypes.items())


@dataclass(frozen=True)
class Reader:
    """Where a model's files are read: a name for messages, a byte source per file."""

    location: str
    open: Callable[[str], ByteSource]

    def small(self, path: str, limit: int) -> bytes:
        """A small file whole (config, index), refused past ``limit`` bytes."""
        source = self.open(path)
        try:
            data = source.read(0, limit + 1)
        except GGUFError as exc:
            raise SafetensorsError(exc.message, where=exc.where, hint=exc.hint) from None
        finally:
            source.close()
        if len(data) > limit:
            raise SafetensorsError(
                f"{path} is larger than {limit:,} bytes", where=f"{self.location}/{path}"
            )
        return data

    def header(self, path: str) -> SafetensorsHeader:
        source = self.open(path)
        try:
            return read_header(source)
        except GGUFError as exc:
            raise SafetensorsError(exc.message, where=exc.where, hint=exc.hint) from None
        finally:
            source.close()


def is_safetensors_model(declared: Sequence[str]) -> bool:
    """Whether a model's declared files are a transformers folder (config.json at the top)."""
    return CONFIG in declared


def folder_reader(folder: Path) -> Reader:
    def open_file(path: str) -> ByteSource:
        try:
            return FileSource(folder / path)
        except GGUFError as exc:
            raise SafetensorsError(
                exc.message,
                where=str(folder / path),
                hint="fetch the model (inferfleet models fetch) or check its folder",
            ) from None

    return Reader(str(folder), open_file)


def _safe(path: object, where: str) -> str:
    if not isinstance(path, str) or not path or len(path) > 1024:
        raise SafetensorsError(f"weight_map names {str(path)[:60]!r}, not a file name", where=where)
    parts = PurePosixPath(path).parts
    if path.startswith("/") or ".." in parts or any(ord(c) < 32 for c in path):
        raise SafetensorsError(f"weight_map names {path[:60]!r} outside the model", where=where)
    return path


def shards_of(index: bytes, where: str) -> list[str]:
    """The files ``model.safetensors.index.json`` maps tensors to, in first-seen order."""
    parsed = parse_json(index, what="the index", where=where, error=SafetensorsError)
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SafetensorsError(
            "field 'weight_map' missing or empty",
            where=where,
            hint="the index maps every tensor name to its shard file",
        )
    shards = list(dict.fromkeys(_safe(p, where) for p in weight_map.values()))
    if len(shards) > MAX_SHARDS:
        raise SafetensorsError(f"the index names {len(shards):,} shards", where=where)
    return shards


def weight_files(reader: Reader, declared: Sequence[str]) -> list[str]:
    """The weight files vLLM loads: the index's shards, else the top-level safetensors."""
    if INDEX in declared:
        return shards_of(reader.small(INDEX, MAX_INDEX_BYTES), f"{reader.location}/{INDEX}")
    found = sorted(p for p in declared if p.endswith(".safetensors") and "/" not in p)
    if not found:
        raise SafetensorsError(
            "the model declares no .safetensors file and no " + INDEX,
            where=reader.location,
            hint="declare model.safetensors (or the shards and their index) in the model's files",
        )
    return found


def read_model(
    reader: Reader, declared: Sequence[str], *, config: bytes | None = None
) -> SafetensorsModel:
    """The config (``config``: its bytes, already read) and every weight file's header
    of the model behind ``reader``."""
    if config is None:
        config = reader.small(CONFIG, MAX_CONFIG_BYTES)
    parsed = parse_config(config, f"{reader.location}/{CONFIG}")
    files = tuple(WeightsFile.of(p, reader.header(p)) for p in weight_files(reader, declared))
    return SafetensorsModel(reader.location, parsed, files)
