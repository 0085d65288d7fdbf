"""Model facts recorded in the fleet repository (``facts/models/<model>.json``).

``inferfleet facts record`` writes, where the model files are, each model's
header facts and file list, keyed by the main file's sha256; a checkout
without the files (a fleet repository's CI) then judges the same. A record is
read bounded and validated like any state file; a stale one (another sha256)
is never used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter

from inferfleet.artifacts.manifest import ManifestEntry
from inferfleet.errors import SpecError
from inferfleet.facts.stored import read_record
from inferfleet.gguf import Inspection
from inferfleet.hub.header_cache import (
    CACHE_FORMAT,
    CachedHeader,
    HubKey,
    Uncachable,
    check_record,
    from_cache,
    to_cache,
)
from inferfleet.io.state_files import MAX_STATE_BYTES, write_state

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
        header = TypeAdapter(CachedHeader).validate_json(to_cache(key, found))
    except Uncachable as exc:
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
        return check_record(key)(record.header)

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
    return from_cache(record.header)


def folder_key(declared: Sequence[ManifestEntry]) -> str | None:
    """A safetensors folder's record key: sha256 over its declared files' sha256; None
    when a file is declared without one (a record could not tell it from another)."""
    if not declared or any(e.sha256 is None for e in declared):
        return None
    text = "".join(f"{e.path}\0{e.sha256}\n" for e in sorted(declared, key=lambda e: e.path))
    return hashlib.sha256(text.encode()).hexdigest()
