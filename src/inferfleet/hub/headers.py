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
   ``split.count``). The parsed facts are cached
   (:mod:`inferfleet.hub.header_cache`), so a second run makes no request.

Before the Hub, facts recorded in the fleet repository
(:mod:`inferfleet.hub.recorded`) answer for a model whose files are
elsewhere; a package model is read by :mod:`inferfleet.hub.package_model`.

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
from dataclasses import dataclass
from pathlib import Path

import httpx

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
from inferfleet.fleetfile.fleet import HubSource, Model, PackageSource, PathSource
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.gguf import GGUFError, Inspection, inspect
from inferfleet.gguf.reader import read_header
from inferfleet.gguf.source import HTTPSource, hf_token_for, http_client
from inferfleet.gguf.split import build_inspection
from inferfleet.hub.auth import resolve_token
from inferfleet.hub.errors import HubError
from inferfleet.hub.fetch_plan import endpoint
from inferfleet.hub.header_cache import (
    HubKey,
    header_cache_path,
    listing_cache_path,
    read_cached_header,
    write_cached_header,
)
from inferfleet.hub.manifest import build_manifest, write_manifest
from inferfleet.hub.package_model import ChunkSource, package_file
from inferfleet.hub.reach import unreachable
from inferfleet.hub.recorded import (
    RECORDED,
    RecordedModel,
    facts_path,
    folder_key,
    read_recorded,
    recorded_inspection,
)
from inferfleet.hub.st_headers import CACHE_PATH, read_cached, read_hub_model
from inferfleet.hub.wire import resolve_url
from inferfleet.io.offline import offline as hub_offline

OFFLINE = "--offline: no network request was made"
# One text for every Hub model a run cannot read, so `check` reports it once (one cause).
NOT_CACHED = f"the model is not on this machine and its Hub facts are not cached ({OFFLINE})"


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


__all__ = ["ModelSources"]
