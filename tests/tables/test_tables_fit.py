"""Tables at 80 columns: every line fits, no word is broken across lines, ids stay whole.

Each command runs as a user runs it (a subprocess with ``COLUMNS=80``, its
stdout piped); the same command with ``--wide`` is the reference: every word
of the narrow table is a word of the wide one, or that word shortened with an
ellipsis, and the columns left out are named.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import free_port
from helpers.git import git
from helpers.real_server import SERVICE, fleet_data, write_fleet

from inferfleet.checks.engine import catalogue

WIDTH = 80


def run(*args: str, columns: int = WIDTH) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [sys.executable, "-m", "inferfleet", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode in {0, 1}, done.stderr + done.stdout
    return done.stdout


def committed(repo: Path, data: dict[str, Any]) -> str:
    """The fleet file committed in a new repository (so status tracks its revision)."""
    write_fleet(repo / "fleet.yaml", data)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fleet")
    return str(repo / "fleet.yaml")


def assert_fits(narrow: str, wide: str) -> None:
    lines = narrow.splitlines()
    too_long = [line for line in lines if len(line) > WIDTH]
    assert not too_long, "\n".join(too_long)
    known = set(wide.split())
    body = " ".join(line for line in lines if "─" not in line).split(" (")[0]
    cells = body.split("left out at")[0] if "left out at" in body else body
    broken = [w for w in cells.split() if w not in known and not w.endswith("…")]
    assert not broken, f"words broken across lines: {broken}\n{narrow}"


def test_check_list_fits_80_columns_and_keeps_every_rule_id_whole() -> None:
    narrow, wide = run("check", "--list"), run("check", "--list", "--wide")
    assert_fits(narrow, wide)
    words = set(narrow.split())
    missing = [r.id for r in catalogue() if r.id not in words]
    assert not missing, missing  # ids are never wrapped nor cut
    assert "GGUF header left out at 80 columns" in " ".join(narrow.split())
    assert "GGUF header" in wide and "left out" not in wide
    assert max(len(line) for line in wide.splitlines()) > WIDTH  # --wide wraps nothing


def test_runtime_list_and_status_fit_80_columns(tmp_path: Path) -> None:
    data = fleet_data(free_port())
    data["runtimes"]["podman-llama"] = {
        "kind": "llama.cpp",
        "image": "ghcr.io/ggml-org/llama.cpp@sha256:" + "ab" * 32,
    }
    fleet = committed(tmp_path / "fleet", data)
    narrow = run("runtime", "list", "--file", fleet)
    wide = run("runtime", "list", "--file", fleet, "--wide")
    assert_fits(narrow, wide)
    assert "podman-llama" in narrow.split()

    narrow = run("status", "--file", fleet, "--no-ssh")
    wide = run("status", "--file", fleet, "--no-ssh", "--wide")
    assert_fits(narrow, wide)
    assert SERVICE in narrow.split() and "stopped" in narrow.split()
    for header in ("url", "last bench", "runtime"):
        assert header in wide
    assert "--wide shows them" in " ".join(narrow.split())


def test_plan_fits_80_columns(tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    data = fleet_data(free_port())
    data["hosts"]["local"]["address"] = "127.0.0.1"
    second = "a-service-with-a-rather-long-name"
    data["services"][second] = {**data["services"][SERVICE], "port": free_port()}
    fleet = committed(repo, data)
    narrow, wide = run("plan", "--file", fleet), run("plan", "--file", fleet, "--wide")
    assert_fits(narrow, wide)
    assert second in narrow.split() and "new" in narrow.split()
