"""Hub files' parsed header facts, cached under ``<cache>/headers`` (L-01, L-11).

Keyed by (endpoint, repo, revision, path): a mirror's repo of the same name is
not the Hub's. A cached entry is parsed as hostile input
(:mod:`inferfleet.io.state_files`): a damaged one is ignored, read again and
replaced (atomically), never trusted. A NaN that JSON cannot carry exactly
leaves the header uncached.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue, TypeAdapter

from inferfleet import paths
from inferfleet.errors import FleetError
from inferfleet.gguf import Inspection, SkippedArray, TensorInfo
from inferfleet.gguf.kv import attention_layout
from inferfleet.gguf.model import MetaValue, ModelFacts
from inferfleet.gguf.split import type_histogram
from inferfleet.hub.errors import HubError
from inferfleet.io.state_files import read_state, write_cache

CACHE_FORMAT = 1
# A Hub file: (endpoint, repo, revision, path). The endpoint is part of the key:
# a mirror's repo of the same name is not the Hub's.
HubKey = tuple[str, str, str, str]


@dataclass(frozen=True, kw_only=True)
class CachedHeader(ModelFacts[JsonValue]):
    """One Hub file's parsed header facts, as written under ``<cache>/headers``."""

    format: int
    endpoint: str
    repo: str
    revision: str
    path: str

    @property
    def key(self) -> HubKey:
        return (self.endpoint, self.repo, self.revision, self.path)


KEY_FIELDS = ("endpoint", "repo", "revision", "path")  # CachedHeader.key, by name


class Uncachable(ValueError):
    """A metadata value JSON cannot carry exactly (a NaN): the header is read again next time."""


def _encode(value: MetaValue) -> JsonValue:
    if isinstance(value, SkippedArray):
        return {"array_of": value.element_type, "count": value.count, "offset": value.offset}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise Uncachable(repr(value))
    return value


def _decode(value: JsonValue) -> MetaValue:
    """A cached metadata value back; anything GGUF metadata cannot be is refused."""
    if isinstance(value, dict):
        array_of, count, offset = value.get("array_of"), value.get("count"), value.get("offset")
        if (
            set(value) != {"array_of", "count", "offset"}
            or not isinstance(array_of, str)
            or not _natural(count)
            or not _natural(offset)
        ):
            raise ValueError(f"not a skipped array: {sorted(value)}")
        assert isinstance(count, int) and isinstance(offset, int)
        return SkippedArray(array_of, count, offset)
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    if value is None:
        raise ValueError("null is not a GGUF metadata value")
    return value


def _natural(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_tensor(t: TensorInfo) -> bool:
    """Every number of a cached tensor is one the reader could have parsed (none negative)."""
    numbers = (t.type_id, t.offset, t.n_elements, *t.shape)
    return all(_natural(n) for n in numbers) and (t.n_bytes is None or _natural(t.n_bytes))


def to_cache(key: HubKey, found: Inspection) -> bytes:
    metadata = {name: _encode(value) for name, value in found.metadata.items()}
    fields = {
        **found.model_facts(),
        "metadata": metadata,
        **dict(zip(KEY_FIELDS, key, strict=True)),
    }
    record = CachedHeader(**fields, format=CACHE_FORMAT)
    return TypeAdapter(CachedHeader).dump_json(record)


def check_record(key: HubKey) -> Callable[[CachedHeader], str | None]:
    def check(record: CachedHeader) -> str | None:
        if record.format != CACHE_FORMAT:
            return f"cache format {record.format}, this inferfleet writes {CACHE_FORMAT}"
        if record.key != key:
            return f"it is the entry of {record.repo}@{record.revision}/{record.path}"
        if not record.parts or not all(_is_tensor(t) for t in record.tensors):
            return "its parts or tensors are not a GGUF's"
        return None

    return check


def from_cache(record: CachedHeader) -> Inspection:
    metadata = {key: _decode(value) for key, value in record.metadata.items()}
    return Inspection(
        **{**record.model_facts(), "metadata": metadata},
        layout=attention_layout(metadata),
        type_histogram=type_histogram(record.tensors),
    )


def _key_name(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:32]


def header_cache_path(key: HubKey) -> Path:
    """Where the parsed header of one Hub file (endpoint, repo, revision, path) is cached."""
    return paths.cache_dir() / "headers" / f"{_key_name(*key)}.json"


def listing_cache_path(endpoint_url: str, repo: str, revision: str) -> Path:
    """Where the Hub listing of ``repo@revision`` on an endpoint is cached (a manifest)."""
    return paths.cache_dir() / "listings" / f"{_key_name(endpoint_url, repo, revision)}.manifest"


def read_cached_header(key: HubKey) -> Inspection | None:
    """The cached facts, or None when there are none or the entry is damaged (never trusted)."""
    try:
        record = read_state(
            header_cache_path(key),
            CachedHeader,
            what="cached GGUF header",
            error=HubError,
            hint="it is read again from the Hub and replaced",
            check=check_record(key),
        )
        return None if record is None else from_cache(record)
    except (FleetError, ValueError):
        return None


def write_cached_header(key: HubKey, found: Inspection) -> bool:
    """Cache ``found`` atomically; False (nothing written) when it cannot be cached exactly."""
    try:
        data = to_cache(key, found)
    except Uncachable:
        return False
    return write_cache(header_cache_path(key), data)
