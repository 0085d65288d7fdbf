"""`apply` builds a missing source runtime on the host itself, before it stops anything.

The host ``here`` (this machine) has an empty runtime cache (its own
INFERFLEET_CACHE_DIR); the fleet's runtime is a llama.cpp fork from a local git
repository with a patch (tests/helpers/git_fork.py). `apply --dry-run` says
the runtime gate builds it; `apply` builds it inside that gate (its phases are the
deploy's events, kind ``build``), then starts the service through the health
gate, and the server runs the fork's binary from the host's cache. A second
`apply` builds nothing. A real compile of llama-server (about 5 minutes on 2
cores), every run: the point is the build the deploy does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from deploy_repo import FleetRepo, stop_recorded
from helpers import free_port
from helpers.git_fork import PATCH, bare_fork, patch_text
from helpers.git_fork import source as fork_source

pytestmark = [pytest.mark.slow, pytest.mark.source_build]


def test_apply_builds_the_missing_fork_then_serves_it(
    cli: Any,
    tmp_path: Path,
    gemma_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    _isolated_state: Path,
) -> None:
    bare, commit = bare_fork()
    cache = tmp_path / "host-cache"
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(cache))
    port = free_port()
    digest = hashlib.sha256(gemma_file.read_bytes()).hexdigest()
    data = {
        "version": 1,
        "hosts": {"here": {"address": "127.0.0.1"}},
        "runtimes": {"fork": {"kind": "llama.cpp", "source": fork_source(bare, commit)}},
        "models": {
            "gemma": {
                "source": {"path": str(gemma_file.parent)},
                "files": [
                    {"path": gemma_file.name, "size": gemma_file.stat().st_size, "sha256": digest}
                ],
            }
        },
        "services": {
            "chat": {
                "host": "here",
                "runtime": "fork",
                "model": "gemma",
                "port": port,
                "ctx_per_slot": 2048,
                "parallel": 1,
                "client": {"chat": False},
                "health": {"timeout": "2m"},
            }
        },
    }
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
    repo.states = {"here": _isolated_state}
    repo.commit("the fork's patch", {PATCH: patch_text(bare, commit, tmp_path / "scratch")})
    try:
        plan = cli("apply", "--file", str(repo.fleet_file), "--dry-run")
        assert plan.code == 0, plan.stderr
        said = " ".join(plan.stdout.split())
        assert "else built here from" in said and commit[:12] in said, said

        done = cli("apply", "--file", str(repo.fleet_file), "--events")
        assert done.code == 0, done.stdout[-3000:] + done.stderr[-3000:]
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        built = [e["detail"] for e in events if e.get("kind") == "build"]
        assert built and "is not installed here" in built[0], events[:10]
        assert any("compiling llama-server" in d for d in built)
        # The build's phases come before the service is started.
        kinds = [e.get("kind") for e in events]
        assert kinds.index("build") < max(i for i, k in enumerate(kinds) if k != "build")

        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10)
        assert health.status_code == 200
        props = httpx.get(f"http://127.0.0.1:{port}/props", timeout=10).json()
        assert commit[:12] in str(props.get("build_info", ""))
        record = repo.record("here", "chat")
        assert record is not None
        binary = Path(psutil.Process(record["pid"]).cmdline()[0])
        assert binary.is_relative_to(cache) and binary.name == "llama-server"

        again = cli("apply", "--file", str(repo.fleet_file), "--events")
        assert again.code == 0, again.stderr
        assert '"build"' not in again.stdout
    finally:
        stop_recorded(_isolated_state)
