"""Golden files for every rendered artifact of the example fleets (byte-stable).

Reviewers read the golden diff. To accept an intended change, rerun with
``INFERFLEET_UPDATE_GOLDEN=1`` and commit the updated files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from render_helpers import FLEETS, ROOT, render

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.bundle import _entry as manifest_entry
from inferfleet.render.bundle import manifest, render_fleet

GOLDEN = ROOT / "tests" / "fixtures" / "golden"
UPDATE = os.environ.get("INFERFLEET_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("fleet", sorted(FLEETS))
def test_every_artifact_matches_its_golden_file(fleet: str) -> None:
    artifacts = render(fleet)
    folder = GOLDEN / fleet
    expected = {a.path: a.content for a in artifacts}
    expected["MANIFEST.json"] = manifest([manifest_entry(a) for a in artifacts])
    if UPDATE:
        for path, content in expected.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert on_disk == set(expected), "golden files and rendered artifacts differ in names"
    for path, content in expected.items():
        golden = (folder / path).read_text(encoding="utf-8")
        assert content == golden, f"{fleet}/{path} differs from its golden file"


@pytest.mark.parametrize("fleet", sorted(FLEETS))
def test_rendering_is_deterministic_across_loads(fleet: str) -> None:
    first = [(a.path, a.content) for a in render(fleet)]
    second = [(a.path, a.content) for a in render_fleet(load_fleet(FLEETS[fleet]))]
    assert first == second


def test_goldens_cover_every_artifact_kind() -> None:
    kinds = {a.kind for fleet in FLEETS for a in render(fleet)}
    assert kinds == {
        "argv",
        "env",
        "systemd",
        "quadlet",
        "prometheus",
        "rules",
        "grafana",
        "client",
        "caddy",
        "gateway",
    }


def test_rendering_reads_no_host_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure: another HOME, cache dir and cwd change nothing (facts come from the fleet)."""
    before = render("homelab")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    after = render("homelab")
    assert [(a.path, a.content) for a in before] == [(a.path, a.content) for a in after]
