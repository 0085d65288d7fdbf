"""Shared helpers of the renderer tests: the example fleets and tool runners."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import ROOT

from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.render.bundle import Artifact, render_fleet

FLEETS = {
    "local": ROOT / "examples" / "local" / "fleet.yaml",
    "homelab": ROOT / "examples" / "homelab" / "fleet.yaml",
    "runtimes": ROOT / "tests" / "fixtures" / "fleets" / "runtimes.yaml",
}


def load(name: str) -> LoadedFleet:
    return load_fleet(FLEETS[name])


def render(name: str) -> list[Artifact]:
    return render_fleet(load(name))


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=env)


def stub_executable(root: Path, path: str) -> None:
    """An executable at ``path`` under ``root`` (systemd-analyze checks ExecStart exists)."""
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/sh\nexit 0\n")
    target.chmod(0o755)
