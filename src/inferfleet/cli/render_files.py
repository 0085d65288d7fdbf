"""Writing what the renderers return: the one place `render` and `render-settings` touch files.

The renderers (inferfleet.render) stay pure and return artifacts as data;
this module writes them, each file atomically (io.files).
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

from inferfleet.errors import UsageError
from inferfleet.io.archive import Archive, Keeper
from inferfleet.io.files import atomic_write
from inferfleet.render.bundle import MANIFEST, Artifact, _entry, manifest, read_manifest


def write_bundle(artifacts: list[Artifact], out: Path, *, only: str | None = None) -> list[str]:
    """Write the artifacts under ``out`` (each file atomically); returns the paths written.

    Files a previous render listed but this one does not are removed, so
    ``out`` mirrors the fleet; with ``only`` (one service) just that
    service's files are replaced and the rest of the manifest is kept.

    Only files this command wrote are ever removed: every path the previous
    manifest names must stay inside ``out`` (relative, no ``..``, no symlink
    leading out), or nothing is written or deleted at all; and a listed file
    is removed only while it still holds the bytes the manifest recorded
    (a hand-edited file, or a symlink, is left alone).
    """
    previous = read_manifest(out)
    for entry in previous:
        _inside(out, entry["path"], manifest=True)
    for artifact in artifacts:
        _inside(out, artifact.path, manifest=False)
    kept = [e for e in previous if only is not None and e.get("service") != only]
    ours = [e for e in previous if e not in kept]
    for artifact in artifacts:
        _write(out / artifact.path, artifact.content)
    current = {a.path for a in artifacts}
    recorded = {e["path"]: e.get("sha256") for e in ours}
    for stale in sorted(set(recorded) - current):
        _remove_if_ours(out / stale, recorded[stale])
    _write(out / MANIFEST, manifest(kept + [_entry(a) for a in artifacts]))
    return [a.path for a in artifacts]


def _inside(out: Path, rel: str, *, manifest: bool) -> Path:
    """``out / rel``, refused unless it stays inside ``out``."""
    pure = PurePosixPath(rel)
    bad = (
        not rel
        or pure.is_absolute()
        or ".." in pure.parts
        or "\\" in rel
        or any(ord(c) < 32 or ord(c) == 127 for c in rel)
        or rel in {".", MANIFEST}
    )
    target = out / rel
    if not bad:
        root = out.resolve()
        bad = root not in target.parent.resolve().parents and target.parent.resolve() != root
    if bad:
        source = f"{out / MANIFEST} lists" if manifest else "the renderer produced"
        raise UsageError(
            f"{source} {rel!r}, which is not a file inside {out}; nothing was written or removed",
            where=str(out / MANIFEST) if manifest else str(out),
            hint="that manifest was not written by inferfleet render (or was edited): delete it "
            "and render into an empty directory",
        )
    return target


def _remove_if_ours(path: Path, sha256: str | None) -> None:
    """Remove ``path`` only if it is a regular file still holding what render wrote."""
    try:
        if path.is_symlink() or not path.is_file() or sha256 is None:
            return
        with path.open("rb") as held:  # streamed: a large file costs no memory
            if hashlib.file_digest(held, "sha256").hexdigest() != sha256:
                return
        path.unlink()
    except OSError:
        return


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o644)


def write_settings(
    dest: Path, text: str, *, repo_root: Path, service: str, state_dir: Path | None = None
) -> bool:
    """Write ``text`` to ``dest`` (mode 600) unless already there; True when it changed.

    Refuses any destination inside the repository: rendered settings hold
    secrets and must never be committed (L-54, L-55). A file there with other
    bytes is archived first, under ``state_dir`` (default: this machine's
    state directory), as a deploy's would be.
    """
    target = dest.resolve()
    root = repo_root.resolve()
    if target == root or root in target.parents:
        raise UsageError(
            f"refusing to write rendered settings inside the repository: {dest}",
            hint="choose a destination outside the fleet checkout (e.g. under /etc or ~/.config)",
        )
    if state_dir is None:
        from inferfleet import paths

        state_dir = paths.state_dir()
    keeper = Keeper(Archive(state_dir), service=service, revision="")
    return keeper.replace(target, text, mode=0o600)
