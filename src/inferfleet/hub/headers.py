"""Model headers and source file lists without the model files (L-01, L-11).

``check`` and ``budget`` judge GGUF header facts; a fleet repository's CI has
no model files. :class:`ModelSources` answers, for each model, in this order:

1. the main GGUF on this machine, where the fleet says it lives;
2. a package model (``source: package``): the model file inside the
   installed package, read in place (its ``chunk_paths()``, concatenated
   virtually; nothing is assembled or written);
3. a Hub model: its header read by HTTP range requests through the one HTTP
   client (:func:`inferfleet.gguf.inspect` on the resolve URL: 256 KiB, then
   the rest of the header, the redirect followed once per file, so at most
   4 requests per file; every part of a split GGUF, found from part 1's
   ``split.count``). The parsed facts are cached under
   ``<cache>/headers/`` keyed by (repo, revision, path) on the endpoint
   (a mirror's repo is not the Hub's), so a second run
   makes no request. A cached entry is parsed as hostile input
   (:mod:`inferfleet.io.state_files`): a damaged one is ignored, read again
   and replaced (atomically), never trusted.

What a source states about the declared files (size, and sha256 where it has
one: the LFS oid) comes from the Hub listing at the pinned revision
(:func:`inferfleet.hub.manifest.build_manifest`, cached by repo and revision),
the installed package (its chunks' sizes and the sha256 it ships), or
``stat`` for a path model.

A safetensors model (a vLLM service's) is answered by :meth:`ModelSources.safetensors`:
its folder on this machine, else its ``config.json`` and each weight file's
8 + N header bytes from the Hub by range (:mod:`inferfleet.hub.st_headers`),
cached under ``<cache>/headers/`` too.

With ``offline`` no request is made: what the cache or this machine cannot
answer is a reason, which the caller shows as a skip.
"""

from __future__ import annotations

import glob
import hashlib
import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import JsonValue, TypeAdapter

from inferfleet import paths
from inferfleet.artifacts.locate import main_file, model_dir
from inferfleet.artifacts.manifest import (
    Manifest,
    ManifestEntry,
    declared_files,
    fragment_of,
    parse_manifest,
)
from inferfleet.artifacts.sources import LocalSources, SourceListing
from inferfleet.artifacts.st_model import CONFIG, SafetensorsModel
from inferfleet.budget.memreport import BootReport
from inferfleet.errors import FleetError, SpecError
from inferfleet.facts.boots import boots_path, read_boots
from inferfleet.facts.hosts import RecordedHost, host_path, read_host
from inferfleet.facts.stored import read_record
from inferfleet.fleetfile.fleet import HubSource, Model, PackageSource, PathSource
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.gguf import GGUFError, Inspection, SkippedArray, TensorInfo, inspect
from inferfleet.gguf.kv import attention_layout
from inferfleet.gguf.model import MetaValue, ModelFacts
from inferfleet.gguf.reader import read_header
from inferfleet.gguf.source import HTTPSource, LocalSource, hf_token_for, http_client
from inferfleet.gguf.split import build_inspection, type_histogram
from inferfleet.hub.auth import resolve_token
from inferfleet.hub.errors import HubError
from inferfleet.hub.fetch_plan import endpoint
from inferfleet.hub.manifest import build_manifest, write_manifest
from inferfleet.hub.reach import unreachable
from inferfleet.hub.st_headers import (
    CACHE_PATH,
    read_cached,
    read_hub_model,
)
from inferfleet.hub.wire import resolve_url
from inferfleet.io.offline import offline as hub_offline
from inferfleet.io.state_files import (
    MAX_STATE_BYTES,
    read_state,
    write_cache,
    write_state,
)

CACHE_FORMAT = 1
# A Hub file: (endpoint, repo, revision, path). The endpoint is part of the key:
# a mirror's repo of the same name is not the Hub's.
HubKey = tuple[str, str, str, str]
OFFLINE = "--offline: no network request was made"
# One text for every Hub model a run cannot read, so `check` reports it once (one cause).
NOT_CACHED = f"the model is not on this machine and its Hub facts are not cached ({OFFLINE})"


# ---------------------------------------------------------------- cached header facts


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


class _Uncachable(ValueError):
    """A metadata value JSON cannot carry exactly (a NaN): the header is read again next time."""


def _encode(value: MetaValue) -> JsonValue:
    if isinstance(value, SkippedArray):
        return {"array_of": value.element_type, "count": value.count, "offset": value.offset}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise _Uncachable(repr(value))
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


def _to_cache(key: HubKey, found: Inspection) -> bytes:
    metadata = {name: _encode(value) for name, value in found.metadata.items()}
    fields = {
        **found.model_facts(),
        "metadata": metadata,
        **dict(zip(KEY_FIELDS, key, strict=True)),
    }
    record = CachedHeader(**fields, format=CACHE_FORMAT)
    return TypeAdapter(CachedHeader).dump_json(record)


def _check_record(key: HubKey) -> Callable[[CachedHeader], str | None]:
    def check(record: CachedHeader) -> str | None:
        if record.format != CACHE_FORMAT:
            return f"cache format {record.format}, this inferfleet writes {CACHE_FORMAT}"
        if record.key != key:
            return f"it is the entry of {record.repo}@{record.revision}/{record.path}"
        if not record.parts or not all(_is_tensor(t) for t in record.tensors):
            return "its parts or tensors are not a GGUF's"
        return None

    return check


def _from_cache(record: CachedHeader) -> Inspection:
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
            check=_check_record(key),
        )
        return None if record is None else _from_cache(record)
    except (FleetError, ValueError):
        return None


def write_cached_header(key: HubKey, found: Inspection) -> bool:
    """Cache ``found`` atomically; False (nothing written) when it cannot be cached exactly."""
    try:
        data = _to_cache(key, found)
    except _Uncachable:
        return False
    return write_cache(header_cache_path(key), data)


# ---------------------------------------------------------------- facts in the repository

FACTS_DIR = "facts"
RECORDED = "recorded"  # the header key's endpoint: facts recorded in the fleet repository


@dataclass(frozen=True)
class RecordedFile:
    size: int
    sha256: str | None


@dataclass(frozen=True)
class RecordedModel:
    """``facts/models/<model>.json``: a model's header facts and files, recorded where the
    files were (``inferfleet facts record``) so a checkout without them judges the same.
    Keyed by the main file's sha256: a changed file makes the record stale, never wrong."""

    format: int
    model: str
    main: str
    sha256: str
    recorded_from: str
    files: dict[str, RecordedFile]
    header: CachedHeader


def facts_path(root: Path, model_name: str) -> Path:
    return root / FACTS_DIR / "models" / f"{model_name}.json"


def recorded_key(model_name: str, sha256: str, main: str) -> HubKey:
    return (RECORDED, model_name, sha256, main)


def write_recorded(
    root: Path,
    model_name: str,
    main: str,
    sha256: str,
    found: Inspection,
    files: dict[str, RecordedFile],
    recorded_from: str,
) -> Path:
    """Write the record atomically (indented, one key per line: diff-friendly); SpecError
    when the header cannot be recorded exactly (a NaN in its metadata) or is too large."""
    key = recorded_key(model_name, sha256, main)
    try:
        header = TypeAdapter(CachedHeader).validate_json(_to_cache(key, found))
    except _Uncachable as exc:
        raise SpecError(
            f"model {model_name!r}: its header has a value JSON cannot carry exactly ({exc})",
            hint="check reads this model's header where its file is",
        ) from None
    record = RecordedModel(CACHE_FORMAT, model_name, main, sha256, recorded_from, files, header)
    data = TypeAdapter(RecordedModel).dump_json(record, indent=1) + b"\n"
    if len(data) > MAX_STATE_BYTES:
        raise SpecError(
            f"model {model_name!r}: its header facts take {len(data):,} bytes, more than "
            f"a record may ({MAX_STATE_BYTES:,})",
            hint="check reads this model's header where its file is",
        )
    where = facts_path(root, model_name)
    write_state(where, data)
    return where


def read_recorded(
    root: Path, model_name: str, main: str, declared: ManifestEntry | None
) -> RecordedModel | str | None:
    """The model's record when it is for the declared main file; None when there is none;
    why it cannot be used (damaged, another model's, a file of another sha256 or size)."""
    where = facts_path(root, model_name)

    def check(record: RecordedModel) -> str | None:
        key = recorded_key(model_name, record.sha256, main)
        if record.model != model_name or record.main != main:
            return f"it records {record.model!r}/{record.main}, not {model_name!r}/{main}"
        return _check_record(key)(record.header)

    try:
        found = read_record(
            where,
            RecordedModel,
            what="recorded model facts",
            hint=f"record them again: inferfleet facts record --model {model_name}",
            check=check,
        )
    except ValueError as exc:
        return f"{where}: {exc}"
    if not isinstance(found, RecordedModel):
        return found  # none, or why it cannot be used
    record = found
    if declared is not None and declared.sha256 is not None and declared.sha256 != record.sha256:
        return (
            f"{where} records sha256 {record.sha256[:12]}..., the fleet declares "
            f"{declared.sha256[:12]}... for {main}: record the facts again"
        )
    mine = record.files.get(main)
    if declared is not None and declared.sha256 is None and mine and mine.size != declared.size:
        return (
            f"{where} records {main} as {mine.size:,} bytes, the fleet declares {declared.size:,}"
        )
    return record


def recorded_inspection(record: RecordedModel) -> Inspection:
    return _from_cache(record.header)


def folder_key(declared: Sequence[ManifestEntry]) -> str | None:
    """A safetensors folder's record key: sha256 over its declared files' sha256; None
    when a file is declared without one (a record could not tell it from another)."""
    if not declared or any(e.sha256 is None for e in declared):
        return None
    text = "".join(f"{e.path}\0{e.sha256}\n" for e in sorted(declared, key=lambda e: e.path))
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- package models


class ChunkSource(LocalSource):
    """A file shipped as consecutive chunks, read as one (a package's model, in place)."""

    def __init__(self, chunks: Sequence[Path], name: str) -> None:
        self._spans: list[tuple[int, Path, int]] = []  # (start, path, size)
        start = 0
        for chunk in chunks:
            size = chunk.stat().st_size
            self._spans.append((start, chunk, size))
            start += size
        super().__init__(name, start)

    def read(self, start: int, end: int) -> bytes:
        out = bytearray()
        for begin, chunk, size in self._spans:
            lo, hi = max(start, begin), min(end, begin + size)
            if lo >= hi:
                continue
            with chunk.open("rb") as handle:
                handle.seek(lo - begin)
                out += handle.read(hi - lo)
        return bytes(out)


@dataclass(frozen=True)
class PackageFile:
    """The model file an installed package ships: its chunks, and the sha256 it states."""

    chunks: tuple[Path, ...]
    sha256: str | None

    @property
    def size(self) -> int:
        return sum(chunk.stat().st_size for chunk in self.chunks)


def package_file(name: str, source: PackageSource) -> PackageFile | str:
    """The installed package's model file, or why it cannot be read here."""
    try:
        module = importlib.import_module(source.import_name)
    except ImportError:
        return (
            f"model {name!r} comes from the package {source.package!r}, which is not installed "
            f"here (pip install {source.package})"
        )
    chunk_paths = getattr(module, "chunk_paths", None)
    if not callable(chunk_paths):
        return (
            f"model {name!r}: the package {source.package!r} does not say where its file lies "
            "(no chunk_paths()); assemble it with `inferfleet up` to check it"
        )
    try:
        chunks = tuple(Path(p) for p in chunk_paths())
        missing = [str(p) for p in chunks if not p.is_file()]
    except Exception as exc:  # a third-party package: any failure is a reason, not a crash
        return f"model {name!r}: package {source.package!r} failed to list its file: {exc}"
    if not chunks or missing:
        return f"model {name!r}: package {source.package!r} is incomplete: {', '.join(missing)}"
    stated = getattr(module, "EXPECTED_SHA256", None)
    sha = stated if isinstance(stated, str) and len(stated) == 64 else None
    return PackageFile(chunks, sha)


# ---------------------------------------------------------------- the sources


@dataclass
class ModelSources:
    """Header facts and source listings for check and budget (see the module docstring)."""

    loaded: LoadedFleet
    offline: bool = False
    endpoint: str | None = None  # default: HF_ENDPOINT, else the Hub
    client: httpx.Client | None = None
    use_recorded: bool = True  # False: read the source itself (facts record)

    def __post_init__(self) -> None:
        self._local = LocalSources(self.loaded)
        self.offline = self.offline or hub_offline()  # HF_HUB_OFFLINE=1 as --offline
        self._reach: str | None = None  # "" reachable, else why not; None: not asked yet
        # What the run read from facts/ instead of the files, or why a record was not used.
        self.notes: list[str] = []
        self._records: dict[str, RecordedModel | str | None] = {}

    def model_sha256(self, model_name: str) -> str | None:
        """The main file's sha256: declared in the fleet, else its recorded facts'."""
        model = self.loaded.fleet.models[model_name]
        try:
            declared = self._declared(model)
            main = main_file(model, declared, name=model_name)
        except FleetError:
            return None
        entry = next((e for e in declared if e.path == main), None)
        if entry is not None and entry.sha256 is not None:
            return entry.sha256
        record = self.recorded(model_name)
        return None if record is None else record.sha256

    def boots(self, service_name: str) -> list[BootReport] | None:
        """The service's boots recorded in facts/services/ when measured with this model file."""
        if not self.use_recorded:
            return None
        model = self.loaded.fleet.services[service_name].model
        if model is None or model not in self.loaded.fleet.models:
            return None
        found = read_boots(self.loaded.root, service_name, model, self.model_sha256(model))
        if found is None:
            return None
        if isinstance(found, str):
            self.notes.append(f"service {service_name!r}: recorded boots not used: {found}")
            return None
        where = boots_path(self.loaded.root, service_name).relative_to(self.loaded.root)
        self.notes.append(
            f"service {service_name!r}: priced by {len(found.boots)} measured boot(s) from {where}"
        )
        return list(found.boots)

    def host_gpus(self, host_name: str) -> RecordedHost | None:
        """The host's GPUs recorded in facts/hosts/ (``doctor``'s discovery there), or None."""
        if not self.use_recorded:
            return None
        found = read_host(self.loaded.root, host_name)
        if isinstance(found, str):
            self.notes.append(f"host {host_name!r}: recorded GPUs not used: {found}")
            return None
        if found is not None:
            where = host_path(self.loaded.root, host_name).relative_to(self.loaded.root)
            self.notes.append(
                f"host {host_name!r}: devices compared with the GPUs recorded in {where} "
                f"({found.gpu_source or 'none discovered'})"
            )
        return found

    def recorded(self, model_name: str) -> RecordedModel | None:
        """The model's facts recorded in the repository, when they are for its declared file."""
        if model_name not in self._records:
            model = self.loaded.fleet.models[model_name]
            try:
                declared = self._declared(model)
                main = main_file(model, declared, name=model_name)
            except FleetError:
                main = None
            found: RecordedModel | str | None = None
            if main is not None:
                entry = next((e for e in declared if e.path == main), None)
                found = read_recorded(self.loaded.root, model_name, main, entry)
            if isinstance(found, str):
                self.notes.append(f"model {model_name!r}: recorded facts not used: {found}")
            elif found is not None:
                where = facts_path(self.loaded.root, model_name).relative_to(self.loaded.root)
                self.notes.append(
                    f"model {model_name!r}: header facts from {where} (recorded from "
                    f"{found.recorded_from}; sha256 {found.sha256[:12]}...)"
                )
            self._records[model_name] = found
        record = self._records[model_name]
        return record if isinstance(record, RecordedModel) else None

    def _cannot_ask(self) -> str | None:
        """Why no Hub request is made: --offline, or the endpoint cannot be reached at all
        (asked once: a name that does not resolve is final, never retried)."""
        if self.offline:
            return NOT_CACHED
        if self._reach is None:  # asked once per run, for every model
            why = unreachable(self._endpoint())
            self._reach = "" if why is None else why
        if self._reach:
            return f"{self._reach} (not retried); Hub models without cached facts were not judged"
        return None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> ModelSources:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def http(self) -> httpx.Client:
        """The one HTTP client of this run (facts record reads a config.json with it)."""
        return self._http()

    @property
    def endpoint_url(self) -> str:
        return self._endpoint()

    def _http(self) -> httpx.Client:
        if self.client is None:
            self.client = http_client()
        return self.client

    def _endpoint(self) -> str:
        if self.endpoint is None:
            self.endpoint = endpoint(None)
        return self.endpoint

    # -- headers -----------------------------------------------------------

    def header(self, model_name: str) -> Inspection | str:
        model = self.loaded.fleet.models[model_name]
        try:
            main = main_file(model, declared_files(model, self.loaded.root), name=model_name)
        except SpecError as exc:
            return f"model {model_name!r}: {exc.message}"
        here = self._local.model_file(model_name)
        if main is None or isinstance(here, Path):
            return self._local.header(model_name)  # read here, or why it is not a GGUF
        record = self.recorded(model_name) if self.use_recorded else None
        if record is not None:  # the repository's facts: no network needed
            return recorded_inspection(record)
        if isinstance(model.source, PackageSource):
            return self._package_header(model_name, model.source)
        if isinstance(model.source, HubSource):
            return self._hub_header(model_name, model, model.source, main)
        return here  # a path model: only its host has the file

    def _package_header(self, name: str, source: PackageSource) -> Inspection | str:
        found = package_file(name, source)
        if isinstance(found, str):
            return found
        reader = ChunkSource(found.chunks, f"package {source.package}")
        try:
            return build_inspection(reader.name, [read_header(reader)])
        except GGUFError as exc:
            return f"model {name!r}: header in package {source.package!r} unreadable: {exc.message}"

    def _hub_header(
        self, name: str, model: Model, source: HubSource, main: str
    ) -> Inspection | str:
        key = (self._endpoint(), source.hub, source.revision, main)
        cached = read_cached_header(key)
        if cached is not None:
            return cached
        cannot = self._cannot_ask()
        if cannot is not None:
            return cannot
        pieces = [e for e in self._declared(model) if _first_fragment_of(e.path, main)]
        try:
            if pieces:  # L-05: assembled after download; its header is in fragment 1
                found = self._fragment_header(key, pieces[0].path, self._declared(model))
            else:
                found = inspect(resolve_url(*key), client=self._http())
        except GGUFError as exc:
            hint = f" ({exc.hint})" if exc.hint else ""
            return (
                f"model {name!r}: cannot read the header of {source.hub}@{source.revision}/"
                f"{main}: {exc.message}{hint}"
            )
        except FleetError as exc:
            return f"model {name!r}: {exc.message}"
        write_cached_header(key, found)
        return found

    def _fragment_header(
        self, key: HubKey, first: str, declared: list[ManifestEntry]
    ) -> Inspection:
        """The header of a file published as ``.partNofM`` fragments, read from fragment 1.

        The file's size is the declared size of the assembled file, so the
        reader judges tensor extents against the whole file, not the fragment.
        """
        endpoint_url, repo, revision, main = key
        total = next((e.size for e in declared if e.path == main), None)
        url = resolve_url(endpoint_url, repo, revision, first)
        piece = HTTPSource(url, token=hf_token_for(url), client=self._http())
        try:
            header = read_header(_Assembled(piece, total))
        finally:
            piece.close()
        return build_inspection(resolve_url(*key), [header])

    # -- safetensors models (vLLM) ----------------------------------------

    def recorded_folder(self, model_name: str) -> SafetensorsModel | None:
        """A safetensors model's facts recorded in the repository, for its declared files."""
        if not self.use_recorded:
            return None
        model = self.loaded.fleet.models[model_name]
        where = facts_path(self.loaded.root, model_name)
        if not where.is_file():
            return None
        try:
            key = folder_key(self._declared(model))
        except FleetError:
            key = None  # the declared-files rules report it
        found = None if key is None else read_cached(where, RECORDED, model_name, key)
        if found is None:
            why = (
                "a declared file has no sha256, so the record cannot be matched to the files"
                if key is None
                else f"{where.relative_to(self.loaded.root)} is damaged or for other files"
            )
            self.notes.append(f"model {model_name!r}: recorded facts not used: {why}")
            return None
        shown = where.relative_to(self.loaded.root)
        self.notes.append(f"model {model_name!r}: config and headers from {shown}")
        return found

    def safetensors(self, model_name: str) -> SafetensorsModel | str:
        """A safetensors model's config and weight headers: its folder on this machine,
        its facts recorded in the repository, else a Hub model's by range requests
        (cached); or why they cannot be read."""
        model = self.loaded.fleet.models[model_name]
        here = (model_dir(model_name, model) / CONFIG).is_file()
        recorded = None if here else self.recorded_folder(model_name)
        if recorded is not None:
            return recorded
        if here or not isinstance(model.source, HubSource):
            return self._local.safetensors(model_name)
        key = (self._endpoint(), model.source.hub, model.source.revision, CACHE_PATH)
        where = header_cache_path(key)
        cached = read_cached(where, *key[:3])
        if cached is not None:
            return cached
        cannot = self._cannot_ask()
        if cannot is not None:
            return cannot
        try:
            declared = [e.path for e in self._declared(model)]
            return read_hub_model(where, *key[:3], declared, self._http())
        except FleetError as exc:
            return f"model {model_name!r}: {exc.render()}"

    # -- source listings ---------------------------------------------------

    def source_files(self, model_name: str) -> SourceListing | str:
        model = self.loaded.fleet.models[model_name]
        if isinstance(model.source, PathSource) and not model_dir(model_name, model).is_dir():
            # The files are on their host: what it recorded.
            record = self.recorded(model_name) if self.use_recorded else None
            if record is not None:
                where = facts_path(self.loaded.root, model_name).relative_to(self.loaded.root)
                files = {
                    path: ManifestEntry.stated(path, f.size, f.sha256)
                    for path, f in record.files.items()
                }
                return SourceListing(f"{where} (recorded from {record.recorded_from})", files)
        if isinstance(model.source, PackageSource):
            return self._package_listing(model_name, model)
        if isinstance(model.source, HubSource):
            return self._hub_listing(model_name, model, model.source)
        return self._local.source_files(model_name)

    def _declared(self, model: Model) -> list[ManifestEntry]:
        return declared_files(model, self.loaded.root)

    def _package_listing(self, name: str, model: Model) -> SourceListing | str:
        assert isinstance(model.source, PackageSource)
        found = package_file(name, model.source)
        if isinstance(found, str):
            return found
        declared = self._declared(model)
        if len(declared) != 1:
            return (
                f"model {name!r}: the package ships one file and {len(declared)} are declared; "
                "declare the one file it ships"
            )
        path = declared[0].path
        return SourceListing(
            f"package {model.source.package}",
            {path: ManifestEntry.stated(path, found.size, found.sha256)},
        )

    def _hub_listing(self, name: str, model: Model, source: HubSource) -> SourceListing | str:
        declared = [e.path for e in self._declared(model)]
        where = f"hub {source.hub}@{source.revision}"
        cached = _read_listing(self._endpoint(), source.hub, source.revision)
        if cached is not None and all(p in cached for p in declared):
            return SourceListing(where, cached)
        cannot = self._cannot_ask()
        if cannot is not None:
            return cannot
        try:
            manifest = build_manifest(
                endpoint=self._endpoint(),
                repo=source.hub,
                revision=source.revision,
                includes=[glob.escape(p) for p in declared],
                token=resolve_token(),
            )
        except HubError as exc:
            if "no file matches" not in exc.message:
                return f"model {name!r}: cannot list {where}: {exc.message}"
            return SourceListing(where, {})  # none of the declared files is there
        except FleetError as exc:
            return f"model {name!r}: cannot list {where}: {exc.message}"
        entries = {e.path: e for e in manifest.entries}
        if cached is not None:
            entries = {**cached, **entries}
        _write_listing(self._endpoint(), manifest, entries)
        return SourceListing(where, entries)


def _first_fragment_of(path: str, main: str) -> bool:
    """Whether ``path`` is fragment 1 of the file ``main`` (L-05)."""
    found = fragment_of(path)
    return found is not None and found.base == main and found.number == 1


class _Assembled:
    """Fragment 1 of a file read as the start of the whole file (whose size is declared)."""

    remote = True

    def __init__(self, first: HTTPSource, size: int | None) -> None:
        self._first = first
        self._size = size

    @property
    def name(self) -> str:
        return self._first.name

    @property
    def size(self) -> int | None:
        return self._size if self._size is not None else self._first.size

    def read(self, start: int, end: int) -> bytes:
        return self._first.read(start, end)

    def close(self) -> None:
        self._first.close()


def _read_listing(endpoint_url: str, repo: str, revision: str) -> dict[str, ManifestEntry] | None:
    """The cached listing, or None when there is none or it is damaged (never trusted)."""
    where = listing_cache_path(endpoint_url, repo, revision)
    if not where.is_file():
        return None
    try:
        manifest = parse_manifest(where)
    except SpecError:
        return None
    if (manifest.repo, manifest.revision) != (repo, revision):
        return None
    return {e.path: e for e in manifest.entries}


def _write_listing(endpoint_url: str, listed: Manifest, entries: dict[str, ManifestEntry]) -> None:
    assert listed.repo is not None and listed.revision is not None
    try:
        write_manifest(
            listing_cache_path(endpoint_url, listed.repo, listed.revision),
            Manifest(listed.repo, listed.revision, listed.commit, tuple(entries.values())),
        )
    except OSError:
        return  # a read-only cache costs requests, not the answer


__all__ = [
    "ChunkSource",
    "ModelSources",
    "PackageFile",
    "header_cache_path",
    "listing_cache_path",
    "package_file",
    "read_cached_header",
    "write_cached_header",
]
