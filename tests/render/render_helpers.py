"""Shared helpers of the renderer tests: the example fleets and tool runners."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
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


CADDY_IMAGE = "docker.io/library/caddy@sha256:" + "c" * 64


def quadlet_proxy_fleet(tmp_path: Path, scope: str, *, selinux: bool = False) -> Path:
    """The runtimes fixture (containers under Quadlet and under systemd's podman run) with
    its proxy in a rootful or rootless container, its host enforcing SELinux or not."""
    data = yaml.safe_load(FLEETS["runtimes"].read_text())
    data["hosts"]["lab"]["selinux"] = selinux
    data["proxy"] |= {"backend": "quadlet", "scope": scope, "image": CADDY_IMAGE}
    if scope == "user":
        data["proxy"]["port"] = 8443  # a rootless container binds no port below 1024
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "templates").symlink_to(FLEETS["runtimes"].parent / "templates")  # it names one
    return fleet
