"""A Hub safetensors model's config and headers, read by range and cached.

:meth:`inferfleet.hub.headers.ModelSources.safetensors` calls this for a Hub
model that is not on this machine. ``config.json`` (and the index of a
sharded model) are read whole (bounded); each weight file only its 8 + N
header bytes, by the same HTTP byte source and client as GGUF headers. The
facts are cached under ``<cache>/headers/`` next to the GGUF entries, keyed
by (endpoint, repo, revision, ``model.safetensors``), and a cached entry is
parsed as hostile input: damaged or foreign, it is read again and replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import TypeAdapter

from inferfleet.artifacts.hfconfig import MAX_CONFIG_BYTES, parse_config
from inferfleet.artifacts.st_model import CONFIG, Reader, SafetensorsModel, WeightsFile, read_model
from inferfleet.errors import FleetError
from inferfleet.gguf.source import ByteSource, HTTPSource, hf_token_for
from inferfleet.hub.errors import HubError
from inferfleet.hub.wire import resolve_url
from inferfleet.io.state_files import read_state, write_cache

CACHE_FORMAT = 1
CACHE_PATH = "model.safetensors"  # the cache key's path (endpoint, repo, revision, this)


@dataclass(frozen=True)
class CachedModel:
    format: int
    kind: str  # "safetensors": never mistaken for a GGUF entry
    endpoint: str
    repo: str
    revision: str
    config: str  # config.json's text, parsed again on read
    files: tuple[WeightsFile, ...]


def hub_reader(endpoint: str, repo: str, revision: str, client: httpx.Client) -> Reader:
    def open_file(path: str) -> ByteSource:
        url = resolve_url(endpoint, repo, revision, path)
        return HTTPSource(url, token=hf_token_for(url), client=client)

    return Reader(_location(endpoint, repo, revision), open_file)


def _location(endpoint: str, repo: str, revision: str) -> str:
    return f"{endpoint.rstrip('/')}/{repo}@{revision}"


def read_cached(where: Path, endpoint: str, repo: str, revision: str) -> SafetensorsModel | None:
    """The facts cached at ``where``, or None when there are none or the entry is
    damaged or another model's (never trusted)."""

    def check(record: CachedModel) -> str | None:
        if record.format != CACHE_FORMAT or record.kind != "safetensors":
            return "not a safetensors entry of this format"
        if (record.endpoint, record.repo, record.revision) != (endpoint, repo, revision):
            return f"it is the entry of {record.repo}@{record.revision}"
        if not record.files or any(
            f.file_size < 0 or any(v < 0 for v in f.dtypes.values()) for f in record.files
        ):
            return "its files are not a safetensors model's"
        return None

    try:
        record = read_state(
            where,
            CachedModel,
            what="cached safetensors headers",
            error=HubError,
            hint="it is read again from the Hub and replaced",
            check=check,
        )
        if record is None:
            return None
        location = _location(endpoint, repo, revision)
        config = parse_config(record.config.encode("utf-8"), f"{location}/{CONFIG}")
    except (FleetError, ValueError):
        return None
    return SafetensorsModel(location, config, record.files)


def write_cached(
    where: Path, endpoint: str, repo: str, revision: str, config: bytes, found: SafetensorsModel
) -> bool:
    """Write the entry atomically (indented: a recorded one is reviewed in diffs); False
    when it was not written (too large for the reader, or a read-only place)."""
    record = CachedModel(
        CACHE_FORMAT, "safetensors", endpoint, repo, revision, config.decode("utf-8"), found.files
    )
    data = TypeAdapter(CachedModel).dump_json(record, indent=1) + b"\n"
    return write_cache(where, data)


def read_hub_model(
    where: Path,
    endpoint: str,
    repo: str,
    revision: str,
    declared: Sequence[str],
    client: httpx.Client,
) -> SafetensorsModel:
    """Config and headers of ``repo@revision`` from the Hub, written to the cache at ``where``."""
    reader = hub_reader(endpoint, repo, revision, client)
    config = reader.small(CONFIG, MAX_CONFIG_BYTES)
    found = read_model(reader, declared, config=config)
    write_cached(where, endpoint, repo, revision, config, found)
    return found
