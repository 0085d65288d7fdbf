"""The deploy's side of the archive: what it files away and what it takes back.

A deploy archives every host file it replaces or removes before touching it
(:class:`~inferfleet.io.archive.Keeper`), and says so in its progress. When
it brings back a service a later revision retired (a rollback, ``apply
--rev``), a file it is about to write whose exact bytes an entry retired for
that service holds (same sha256 and size) is restored from that entry
instead of written anew: byte for byte, with its archived mode, recorded in
the entry's index. A copy that does not match is left alone; one found
damaged when read is reported, and the file is written from the render.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from inferfleet.deploy.actions import Action
from inferfleet.deploy.state import Emit
from inferfleet.io.archive import Entry, Keeper
from inferfleet.io.archive_index import ArchivedFile, ArchiveError
from inferfleet.render.frontdoor import Launch
from inferfleet.render.settings import RenderedSettings


def replaced_files(
    actions: list[Action], desired: Launch, settings: Mapping[str, RenderedSettings]
) -> dict[Path, str]:
    """The host files this deploy's actions write, with what they will hold."""
    files = {f.path: f.content for f in desired.files}
    found: dict[Path, str] = {}
    for action in actions:
        if action.kind == "install":
            found[Path(action.target)] = files[action.target]
        elif action.kind == "write-settings":
            found[Path(action.target)] = settings[action.target].content
    return found


def wanted(files: Mapping[Path, str]) -> dict[str, tuple[str, int]]:
    """path -> (sha256, size) of what a deploy writes: what an archived copy must hold."""
    found = {}
    for path, content in files.items():
        data = content.encode("utf-8")
        found[str(path)] = (hashlib.sha256(data).hexdigest(), len(data))
    return found


@dataclass
class Restorer:
    """Writes a deploy's files: from the archive where an entry retired for the service
    holds exactly the bytes to write, else as rendered (through the Keeper either way)."""

    emit: Emit
    keeper: Keeper
    service: str
    matches: dict[str, tuple[Entry, ArchivedFile]]
    restored: list[dict[str, str]] = field(default_factory=list)  # {"entry", "path"}

    @classmethod
    def for_files(
        cls, emit: Emit, keeper: Keeper, service: str, files: Mapping[Path, str]
    ) -> Restorer:
        """One for a deploy that writes ``files`` (path -> content)."""
        matches = keeper.archive.matching(service, wanted(files)) if files else {}
        return cls(emit, keeper, service, matches)

    def write(self, path: Path, content: str, *, mode: int) -> None:
        found = self.matches.get(str(path))
        if found is not None and restore(self.emit, self.keeper, self.service, *found):
            self.restored.append({"entry": found[0].name, "path": str(path)})
            return
        self.keeper.replace(path, content, mode=mode)

    def record(self) -> list[dict[str, str]]:
        """Record the restores in their entries' indexes (one per entry); returns them."""
        self.keeper.restored((r["entry"], r["path"]) for r in self.restored)
        return list(self.restored)


def restore(emit: Emit, keeper: Keeper, name: str, entry: Entry, item: ArchivedFile) -> bool:
    """Put an archived copy back; False when the copy turns out damaged (nothing written)."""
    try:
        keeper.restore(entry, item)
    except ArchiveError as exc:
        emit(
            {
                "event": "step",
                "kind": "restore",
                "service": name,
                "detail": f"not restored from archive: {entry.name} ({exc.message}); "
                f"writing {item.path} as rendered",
                "path": item.path,
            }
        )
        return False
    emit(
        {
            "event": "step",
            "kind": "restore",
            "service": name,
            "detail": f"restored from archive: {entry.name} ({item.path}, mode {item.mode:04o})",
            "entry": entry.name,
            "path": item.path,
        }
    )
    return True


def announce(emit: Emit, name: str, entry: Entry | None) -> None:
    """Say what an archive step filed, and where."""
    if entry is None or entry.index is None:
        return
    paths = ", ".join(f.path for f in entry.index.files)
    emit(
        {
            "event": "step",
            "kind": "archive",
            "service": name,
            "detail": f"archived {paths} to {entry.folder} ({entry.index.reason})",
        }
    )
