"""The verify gate: every declared file has its byte count and its hash, or nothing starts.

One code path for ``up``, ``apply`` (the deploy gate) and ``models verify``:

1. a split GGUF must be declared with every part (L-04);
2. every declared file is checked by ``stat`` first (L-08: a wrong size or a
   missing file fails in microseconds, and no file is read to count bytes);
3. files the verification record vouches for (unchanged since they were
   hashed) are not read again, unless ``full``;
4. every other file with a declared hash (``sha256``, ``gitsha1``, or the
   sha256 taken when fragments were assembled, L-05) is hashed once, on all
   cores at once (hashlib releases the GIL), and recorded when it matches
   (L-01). A file without a record is not refused: it is hashed, then used.
   Only a mismatch refuses, and a mismatch is never recorded.

Size-only entries (inline files without ``sha256``, assembled files without a
recorded hash) stop at ``stat``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from inferfleet.artifacts.digests import file_digests
from inferfleet.artifacts.locate import SPLIT_RE, model_dir, record_file
from inferfleet.artifacts.manifest import ManifestEntry, declared_files
from inferfleet.artifacts.record import Record
from inferfleet.errors import ArtifactError
from inferfleet.fleetfile.fleet import HubSource, Model, PackageSource

OnBytes = Callable[[int], None]
OnStart = Callable[[int, int], None]  # (bytes to hash, files to hash)
NOTHING_TOUCHED = "nothing was stopped or started"


@dataclass(frozen=True)
class Checked:
    path: str
    size: int  # declared
    status: str  # ok | missing | wrong-size | wrong-hash
    method: str  # stat | record | sha256 | gitsha1
    detail: str = ""  # what is wrong, without the path

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class FilesRejected(ArtifactError):
    """Declared files are missing or are not the declared bytes; ``results`` has every check."""

    def __init__(
        self, message: str, *, hint: str, where: str, folder: Path, results: list[Checked]
    ) -> None:
        super().__init__(message, hint=hint, where=where)
        self.folder = folder
        self.results = results


def gate(
    name: str,
    model: Model,
    fleet_root: Path,
    *,
    where: str,
    full: bool = False,
    report_all: bool = False,
    jobs: int | None = None,
    on_bytes: OnBytes | None = None,
    on_start: OnStart | None = None,
) -> list[Checked]:
    """Verify model ``name``'s declared files on this host; FilesRejected on any problem.

    ``on_start(bytes, files)`` is called once before hashing starts (not at
    all when the record vouches for everything); ``on_bytes(n)`` as bytes are
    hashed (calls are serialised, any thread). ``report_all`` hashes the other
    files even after a stat problem, so every problem is in the error's
    ``results`` (``models verify``); otherwise a stat problem refuses at once.
    """
    files = declared_files(model, fleet_root)
    check_splits(name, files, where=where)
    folder = model_dir(name, model)
    if record_file(model) is not None:
        refuse_assembled(name, files, where=where)
    results = verify_files(
        folder,
        files,
        record_at=record_file(model),
        full=full,
        jobs=jobs,
        fail_fast=not report_all,
        on_bytes=on_bytes,
        on_start=on_start,
    )
    raise_for_problems(
        folder, results, total=len(files), where=where, name=name, hint=fix_hint(name, model)
    )
    return results


def check_splits(name: str, files: Sequence[ManifestEntry], *, where: str) -> None:
    """A split GGUF must be declared with every part, 1..N (L-04)."""
    splits: dict[str, tuple[int, set[int]]] = {}
    for entry in files:
        match = SPLIT_RE.match(entry.path)
        if match is None:
            continue
        count, parts = splits.setdefault(match["stem"], (int(match["count"]), set()))
        if int(match["count"]) != count:
            raise ArtifactError(
                f"model {name}: parts of {match['stem']} disagree on the part count",
                where=where,
                hint=f"declare the parts of one split only; {NOTHING_TOUCHED}",
            )
        parts.add(int(match["part"]))
    for stem, (count, parts) in sorted(splits.items()):
        missing = sorted(set(range(1, count + 1)) - parts)
        if missing:
            raise ArtifactError(
                f"model {name}: split {stem} has {count} parts but {len(parts)} are declared "
                f"(missing part {', '.join(str(m) for m in missing[:5])})",
                where=where,
                hint="declare every part (write the manifest with inferfleet models manifest); "
                f"the server loads part 1 and needs all of them; {NOTHING_TOUCHED}",
            )


def verify_files(
    folder: Path,
    entries: Sequence[ManifestEntry],
    *,
    record_at: Path | None = None,
    full: bool = False,
    jobs: int | None = None,
    fail_fast: bool = False,
    on_bytes: OnBytes | None = None,
    on_start: OnStart | None = None,
) -> list[Checked]:
    """Check every declared file in ``folder``; one result per entry, sorted by path.

    With ``fail_fast``, a stat problem returns at once and the files that
    would have been hashed are left out of the result. ``record_at`` keeps the
    verification record outside ``folder`` (a Hugging Face cache snapshot).
    Files are stat'ed through links, so a cache snapshot's entries are keyed by
    their blob (size, mtime, inode): a blob changed in place is hashed again.
    """
    record = Record(folder, path=record_at)
    results, to_hash = _by_stat(folder, entries, record, full)
    changed = False
    if to_hash and not (fail_fast and any(not c.ok for c in results)):
        if on_start is not None:
            on_start(sum(item.entry.size for item in to_hash), len(to_hash))
        progress = _serialised(on_bytes)
        workers = max(1, min(jobs or os.cpu_count() or 1, len(to_hash)))
        with ThreadPoolExecutor(workers, thread_name_prefix="inferfleet-verify") as pool:
            hashed = list(pool.map(lambda item: _hash_one(folder, item, progress), to_hash))
        for item, (checked, digest) in zip(to_hash, hashed, strict=True):
            results.append(checked)
            if checked.ok:
                record.put(
                    item.entry.path,
                    item.st,
                    sha256=digest if item.kind == "sha256" else None,
                    gitsha1=digest if item.kind == "gitsha1" else None,
                    save=False,
                )
                changed = True
    for checked in results:
        # Never keep an entry for bytes that did not match.
        if not checked.ok and record.forget(checked.path, save=False):
            changed = True
    if changed:
        record.save()  # one write for every file hashed or forgotten
    return sorted(results, key=lambda c: c.path)


def raise_for_problems(
    folder: Path,
    results: list[Checked],
    *,
    total: int | None = None,
    where: str = "",
    name: str | None = None,
    hint: str = "",
) -> None:
    """FilesRejected naming every problem in ``results``; nothing when all are ok."""
    bad = [c for c in results if not c.ok]
    if not bad:
        return
    subject = f"model {name}: " if name is not None else ""
    listing = "; ".join(f"{c.path}: {c.detail}" for c in bad)
    raise FilesRejected(
        f"{subject}{len(bad)} of {total or len(results)} declared file(s) in {folder} "
        f"failed verification: {listing}",
        hint=f"{hint or 'put the declared files there'}; {NOTHING_TOUCHED}",
        where=where or str(folder),
        folder=folder,
        results=results,
    )


def refuse_assembled(name: str, files: Sequence[ManifestEntry], *, where: str) -> None:
    """A Hugging Face cache holds a repo's files, not files assembled from fragments (L-05)."""
    assembled = [e.path for e in files if e.kind == "parts"]
    if assembled:
        raise ArtifactError(
            f"model {name}: {assembled[0]} is assembled from .partNofM fragments (L-05), "
            "which the Hugging Face cache cannot hold",
            where=where,
            hint=f"drop hf_cache from this model (fetch assembles it into the model's dir); "
            f"{NOTHING_TOUCHED}",
        )


def fix_hint(name: str, model: Model) -> str:
    """How to get the declared bytes back, by where the model comes from."""
    source = model.source
    if isinstance(source, HubSource) and source.hf_cache is not False:
        from inferfleet.artifacts.hfcache import mismatch_note

        return (
            f"the Hugging Face cache does not hold the declared bytes: remove the bad file from "
            f"the cache (`hf cache delete`, or delete the blob its link points to) and run "
            f"`inferfleet models fetch {name}`, which downloads only what is missing into "
            f"that cache{mismatch_note(source, str(Path.home()))}"
        )
    if isinstance(source, HubSource):
        return (
            f"fetch it again: inferfleet models fetch {name} (verified files are not "
            "downloaded twice)"
        )
    if isinstance(source, PackageSource):
        return (
            f"delete the wrong file; `inferfleet up` assembles it again from the package "
            f"{source.package}"
        )
    return "put the declared file in the model's folder, or fix its size/sha256 in the fleet file"


# ---------------------------------------------------------------- internals


@dataclass(frozen=True)
class _ToHash:
    entry: ManifestEntry
    st: os.stat_result
    kind: str  # sha256 | gitsha1
    expected: str


def _by_stat(
    folder: Path, entries: Sequence[ManifestEntry], record: Record, full: bool
) -> tuple[list[Checked], list[_ToHash]]:
    """Stat every file (L-08); what the stat and the record settle, and what must be hashed."""
    results: list[Checked] = []
    to_hash: list[_ToHash] = []
    for entry in entries:
        try:
            st = (folder / entry.path).stat()
        except FileNotFoundError:
            results.append(Checked(entry.path, entry.size, "missing", "stat", "not on disk"))
            continue
        if st.st_size != entry.size:
            detail = f"{st.st_size:,} bytes on disk, {entry.size:,} declared (L-08)"
            results.append(Checked(entry.path, entry.size, "wrong-size", "stat", detail))
            continue
        kind, expected = _expected(entry, record)
        if kind == "stat":
            results.append(Checked(entry.path, entry.size, "ok", "stat"))
        elif not full and record.vouches(
            entry.path,
            st,
            sha256=expected if kind == "sha256" else None,
            gitsha1=expected if kind == "gitsha1" else None,
        ):
            results.append(Checked(entry.path, entry.size, "ok", "record"))
        else:
            to_hash.append(_ToHash(entry, st, kind, expected))
    return results, to_hash


def _expected(entry: ManifestEntry, record: Record) -> tuple[str, str]:
    if entry.sha256 is not None:
        return "sha256", entry.sha256
    if entry.gitsha1 is not None:
        return "gitsha1", entry.gitsha1
    if entry.kind == "parts":
        # Hashed when it was assembled from verified fragments (L-05).
        recorded = record.recorded_sha256(entry.path)
        if recorded is not None:
            return "sha256", recorded
    return "stat", ""


def _hash_one(folder: Path, item: _ToHash, on_bytes: OnBytes | None) -> tuple[Checked, str]:
    entry = item.entry
    digests = file_digests(
        folder / entry.path, size=entry.size, git=item.kind == "gitsha1", on_bytes=on_bytes
    )
    digest = digests.gitsha1 if item.kind == "gitsha1" else digests.sha256
    if digest == item.expected:
        return Checked(entry.path, entry.size, "ok", item.kind), digest
    detail = f"{item.kind} {digest} on disk, {item.expected} declared (L-01)"
    return Checked(entry.path, entry.size, "wrong-hash", item.kind, detail), digest


def _serialised(on_bytes: OnBytes | None) -> OnBytes | None:
    """``on_bytes`` called from one thread at a time, so progress bars need no lock."""
    if on_bytes is None:
        return None
    lock = threading.Lock()

    def call(count: int) -> None:
        with lock:
            on_bytes(count)

    return call
