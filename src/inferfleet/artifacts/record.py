"""The verification record of a model folder: which files were hashed, and as what.

Hashing a 50 GiB file on every start would be its own outage, so a small
JSON file next to the model files remembers, per file, the stat key it had
when it was hashed (size, mtime in ns, inode) and the hashes that matched::

    {"model.gguf": {"stat": [253113024, 1733212800000000000, 41], "sha256": "a5fd..."},
     "README.md": {"stat": [1570, 1733212800000000000, 42], "gitsha1": "5d8e..."}}

An unchanged file is then vouched for without being read. Fetch, the verify
gate and ``models verify`` share this one record. The record is a cache of
work done, never a source of truth: a record that is unreadable, torn, or of
the wrong shape is treated as absent (files get hashed again), and an entry
is only written after its bytes matched the declared hash.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

from inferfleet.bounded import load_json
from inferfleet.io.files import atomic_write

RECORD_NAME = ".inferfleet-verified.json"
MAX_RECORD_BYTES = 16 << 20  # a stat key and two digests per file of one model

Entry = dict[str, object]


def stat_key(st: os.stat_result) -> list[int]:
    """What must not change for a verified file to stay verified."""
    return [st.st_size, st.st_mtime_ns, st.st_ino]


class Record:
    """The verification record of one model folder; thread-safe; saved atomically."""

    def __init__(self, folder: Path, *, path: Path | None = None) -> None:
        """The record of ``folder``, kept in it unless ``path`` puts it elsewhere."""
        self.path = folder / RECORD_NAME if path is None else path
        self._lock = threading.Lock()
        self._data = _load(self.path)

    def vouches(
        self, rel: str, st: os.stat_result, *, sha256: str | None, gitsha1: str | None
    ) -> bool:
        """Whether ``rel`` was verified with these hashes and has not changed since."""
        with self._lock:
            known = self._data.get(rel)
        if known is None or known["stat"] != stat_key(st):
            return False
        if sha256 is not None and known.get("sha256") != sha256:
            return False
        return gitsha1 is None or known.get("gitsha1") == gitsha1

    def known_sha256(self, rel: str, st: os.stat_result) -> str | None:
        """The recorded sha256 of ``rel`` if the file is unchanged since it was hashed."""
        with self._lock:
            known = self._data.get(rel)
        if known is None or known["stat"] != stat_key(st):
            return None
        value = known.get("sha256")
        return value if isinstance(value, str) else None

    def recorded_sha256(self, rel: str) -> str | None:
        """The sha256 recorded for ``rel`` even if the file changed since (to compare)."""
        with self._lock:
            known = self._data.get(rel)
        value = None if known is None else known.get("sha256")
        return value if isinstance(value, str) else None

    def entries(self) -> dict[str, Entry]:
        """A copy of what the record holds (path -> stat key and hashes)."""
        with self._lock:
            return {rel: dict(entry) for rel, entry in self._data.items()}

    def put(
        self,
        rel: str,
        st: os.stat_result,
        *,
        sha256: str | None,
        gitsha1: str | None,
        save: bool = True,
    ) -> None:
        """Remember that ``rel`` (with this stat) has these hashes; call only after they matched.

        ``save=False`` leaves the write to a later :meth:`save` (one write for many files).
        """
        entry: Entry = {"stat": stat_key(st)}
        if sha256 is not None:
            entry["sha256"] = sha256
        if gitsha1 is not None:
            entry["gitsha1"] = gitsha1
        with self._lock:
            self._data[rel] = entry
            if save:
                self._save()

    def forget(self, rel: str, *, save: bool = True) -> bool:
        """Drop ``rel``'s entry; whether there was one."""
        with self._lock:
            known = self._data.pop(rel, None) is not None
            if known and save:
                self._save()
        return known

    def save(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        text = json.dumps(self._data, indent=1, sort_keys=True) + "\n"
        # A read-only model folder only means the files are hashed again next time.
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, text)


def _load(path: Path) -> dict[str, Entry]:
    """The record's entries; anything damaged reads as absent, never as a crash."""
    try:
        data = load_json(path, MAX_RECORD_BYTES, what="digest record")
    except OSError:  # absent, or damaged (BoundedReadError is one): hashed again
        return {}
    if not isinstance(data, dict):
        return {}
    return {rel: entry for rel, entry in data.items() if _valid(entry)}


def _valid(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    key = entry.get("stat")
    if not (
        isinstance(key, list)
        and len(key) == 3
        and all(isinstance(n, int) and not isinstance(n, bool) for n in key)
    ):
        return False
    hashes = [entry.get(kind) for kind in ("sha256", "gitsha1") if kind in entry]
    return bool(hashes) and all(isinstance(h, str) for h in hashes)
