"""Writing what the renderers return: the one place `render` and `render-settings` touch files.

The renderers (inferfleet.render) stay pure and return artifacts as data;
this module writes them, each file atomically (io.files).
"""

from __future__ import annotations

from pathlib import Path

from inferfleet.errors import UsageError
from inferfleet.io.files import atomic_write, write_if_changed
from inferfleet.render.bundle import MANIFEST, Artifact, _entry, manifest, read_manifest


def write_bundle(artifacts: list[Artifact], out: Path, *, only: str | None = None) -> list[str]:
    """Write the artifacts under ``out`` (each file atomically); returns the paths written.

    Files a previous render listed but this one does not are removed, so
    ``out`` mirrors the fleet; with ``only`` (one service) just that
    service's files are replaced and the rest of the manifest is kept.
    """
    previous = read_manifest(out)
    kept = [e for e in previous if only is not None and e.get("service") != only]
    ours = [e for e in previous if e not in kept]
    for artifact in artifacts:
        _write(out / artifact.path, artifact.content)
    current = {a.path for a in artifacts}
    for stale in sorted({e["path"] for e in ours} - current):
        (out / stale).unlink(missing_ok=True)
    _write(out / MANIFEST, manifest(kept + [_entry(a) for a in artifacts]))
    return [a.path for a in artifacts]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o644)


def write_settings(dest: Path, text: str, *, repo_root: Path) -> bool:
    """Write ``text`` to ``dest`` (mode 600) unless already there; True when it changed.

    Refuses any destination inside the repository: rendered settings hold
    secrets and must never be committed (L-54, L-55).
    """
    target = dest.resolve()
    root = repo_root.resolve()
    if target == root or root in target.parents:
        raise UsageError(
            f"refusing to write rendered settings inside the repository: {dest}",
            hint="choose a destination outside the fleet checkout (e.g. under /etc or ~/.config)",
        )
    return write_if_changed(target, text, mode=0o600)
