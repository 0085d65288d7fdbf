"""A fleet repository the way a user has one: a bare remote, the operator's clone, and
one checkout per test host cloned from the remote (each with its own state dir)."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from helpers.git import git


@dataclass
class FleetRepo:
    folder: Path
    data: dict[str, Any]
    checkouts: dict[str, Path] = field(default_factory=dict)
    states: dict[str, Path] = field(default_factory=dict)

    @property
    def operator(self) -> Path:
        return self.folder / "operator"

    @property
    def remote(self) -> Path:
        return self.folder / "remote.git"

    @property
    def fleet_file(self) -> Path:
        return self.operator / "fleet.yaml"

    @classmethod
    def create(cls, folder: Path, data: dict[str, Any], hosts: list[str]) -> FleetRepo:
        repo = cls(folder, data)
        repo.operator.mkdir(parents=True)
        git(repo.operator, "init", "-q", "-b", "main")
        (repo.operator / "README.md").write_text("# our fleet\n")
        repo.fleet_file.write_text(yaml.safe_dump(data, sort_keys=False))
        git(repo.operator, "add", "-A")
        git(repo.operator, "commit", "-q", "-m", "first fleet")
        git(folder, "init", "-q", "--bare", "-b", "main", str(repo.remote))
        git(repo.operator, "remote", "add", "origin", str(repo.remote))
        git(repo.operator, "push", "-q", "-u", "origin", "main")
        for host in hosts:
            checkout = repo.host_folder(host) / "fleet"
            git(folder, "clone", "-q", str(repo.remote), str(checkout))
            repo.checkouts[host] = checkout
        return repo

    def host_folder(self, host: str) -> Path:
        return self.folder / "hosts" / host

    def commit(self, message: str, files: dict[str, str] | None = None) -> str:
        """Write the fleet (and other files), commit; returns the new HEAD."""
        self.fleet_file.write_text(yaml.safe_dump(self.data, sort_keys=False))
        for name, text in (files or {}).items():
            path = self.operator / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git(self.operator, "add", "-A")
        git(self.operator, "commit", "-q", "-m", message)
        return self.head()

    def head(self) -> str:
        return git(self.operator, "rev-parse", "HEAD").strip()

    def marker(self, host: str, service: str) -> dict[str, Any] | None:
        path = self.states[host] / "markers" / f"{service}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def record(self, host: str, service: str) -> dict[str, Any] | None:
        path = self.states[host] / "services" / f"{service}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def checkout_head(self, host: str) -> str:
        return git(self.checkouts[host], "rev-parse", "HEAD").strip()


def local_fleet(
    runtime: dict[str, Any], model: dict[str, Any], port: int, **service: Any
) -> dict[str, Any]:
    """A fleet with one host (this machine, "here"), runtime "fake", model "tiny" and one
    service "a" on ``port``; ``service`` adds or replaces the service's fields."""
    return {
        "version": 1,
        "hosts": {"here": {"address": "127.0.0.1"}},
        "runtimes": {"fake": runtime},
        "models": {"tiny": copy.deepcopy(model)},  # tests edit their fleet's copy
        "services": {
            "a": {
                "host": "here",
                "runtime": "fake",
                "model": "tiny",
                "port": port,
                "ctx_per_slot": 512,
                "health": {"timeout": "20s"},
                **service,
            },
        },
    }


def stop_recorded(state_dir: Path) -> None:
    """Stop the servers a test's applies started, by their recorded pid (never by name)."""
    for record in (state_dir / "services").glob("*.json"):
        with contextlib.suppress(ProcessLookupError, ValueError, KeyError):
            os.kill(json.loads(record.read_text())["pid"], signal.SIGKILL)
