"""Fixtures for deploy tests: real test hosts reached over real ssh, real fleet repositories.

``lab`` (one per session) is two hosts, h1 and h2, each a network namespace
with its own sshd. ``fleet`` builds a fleet repository for a test: a bare
remote, the operator's clone, a checkout and a state dir per host. The hosts
run this checkout's inferfleet (they share the machine's filesystem, so the
same interpreter and the cached llama-server and model are there too).

Root and ``apt-get install openssh-server`` are required; a missing piece
fails with the command that installs it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deploy_hosts import Lab, claim_tag
from deploy_repo import FleetRepo
from inferfleet_entry import ensure_registered

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "inferfleet_entry.py"
FAKE_PORT = 8080


@pytest.fixture(scope="session", autouse=True)
def _deploy_verbs() -> None:
    # The in-process `cli` fixture runs inferfleet.cli.app.main; make sure the
    # deploy verbs are on it even before app.py registers them.
    ensure_registered()


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("lab"), claim_tag())
    try:
        lab.start(["h1", "h2"])
        yield lab
    finally:
        lab.close()


def remote_command() -> str:
    return f"{sys.executable} {ENTRY}"


@pytest.fixture
def deploy_env(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """ssh config, a private control dir (short: socket paths have a limit), the remote command."""
    control = Path(tempfile.mkdtemp(prefix="ifssh", dir="/tmp"))
    env = {
        "INFERFLEET_SSH_CONFIG": str(lab.ssh_config),
        "INFERFLEET_SSH_CONTROL_DIR": str(control),
        "INFERFLEET_REMOTE_COMMAND": remote_command(),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield env
    for host in lab.hosts.values():
        subprocess.run(
            ["ssh", "-F", str(lab.ssh_config), "-o", f"ControlPath={control}/%C", "-O", "exit",
             host.address],
            capture_output=True,
            timeout=10,
            check=False,
        )  # fmt: skip
    # Whatever a test left running on a host is stopped by pid; sshd stays for the next test.
    for host in lab.hosts.values():
        keep = {host.sshd.pid} if host.sshd is not None else set()
        for pid in host.pids():
            if pid not in keep:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    for leftover in control.iterdir():
        leftover.unlink(missing_ok=True)
    control.rmdir()


@pytest.fixture(scope="session")
def fake_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable that behaves like llama-server for the fault tests (fast, tiny)."""
    folder = tmp_path_factory.mktemp("fake-runtime")
    wrapper = folder / "llama-server"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fake_llama_server.py"} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A small model file; the first deploy gate hashes it once and records it."""
    folder = tmp_path_factory.mktemp("tiny-model")
    data = b"GGUF" + bytes(range(256)) * 16
    (folder / "tiny.gguf").write_bytes(data)
    entry = {"path": "tiny.gguf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return {"source": {"path": str(folder)}, "files": [entry]}


FleetFactory = Callable[..., FleetRepo]


@pytest.fixture
def fleet(
    lab: Lab,
    deploy_env: dict[str, str],
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    tmp_path: Path,
) -> FleetFactory:
    """Build a fleet repository with ``services`` (name -> fields); fake runtime by default."""

    def make(services: dict[str, dict[str, Any]], **top: Any) -> FleetRepo:
        folder = tmp_path / "fleet"
        hosts = {}
        states = {}
        for name, host in lab.hosts.items():
            states[name] = folder / "hosts" / name / "state"
            hosts[name] = {
                "address": host.address,
                "checkout": str(folder / "hosts" / name / "fleet"),
                "state_dir": str(states[name]),
            }
        data: dict[str, Any] = {
            "version": 1,
            "hosts": hosts,
            "runtimes": {"fake": {"kind": "llama.cpp", "binary": str(fake_runtime)}},
            "models": {"tiny": copy.deepcopy(tiny_model)},  # tests edit their fleet's copy
            "services": {},
        }
        for name, fields in services.items():
            host = fields.get("host", "h1")
            data["services"][name] = {
                "host": host,
                "runtime": "fake",
                "model": "tiny",
                "bind": lab.hosts[host].address,
                # the test host's address: the tests reach it from the root namespace (L-58)
                "exposure": {
                    "level": "lan",
                    "reason": "the deploy tests reach it from the root namespace",
                },
                "port": FAKE_PORT,
                "ctx_per_slot": 512,
                "health": {"timeout": "20s"},
                **fields,
            }
        data.update(top)
        repo = FleetRepo.create(folder, data, list(lab.hosts))
        repo.states = states
        return repo

    return make
