"""Fixtures of the Hub tests: an isolated environment, the test Hub, fleet files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hub_repos import Blobs, blobs
from hub_tokens import GOOD_TOKEN, SCOPED_TOKEN, FleetMaker
from hubserver import HubServer


@pytest.fixture(autouse=True)
def _hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No real token, endpoint or cache of the user's leaks into a test."""
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_ENDPOINT",
        "HF_HOME",
        "INFERFLEET_HF_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-hf-login" / "token"))
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def model_blobs() -> Blobs:
    return blobs()


@pytest.fixture
def hub(model_blobs: Blobs) -> Iterator[HubServer]:
    server = HubServer(tokens={GOOD_TOKEN: None, SCOPED_TOKEN: {"test/other"}})
    with server:
        yield server


@pytest.fixture
def make_fleet(tmp_path: Path) -> FleetMaker:
    """Write fleet.yaml with one hub model; returns its path."""

    def make(
        repo: str,
        *,
        name: str = "m",
        revision: str = "main",
        manifest: str | None = "m.manifest",
        files: list[dict[str, object]] | None = None,
    ) -> Path:
        model: dict[str, object] = {
            "source": {"hub": repo, "revision": revision},
            "dir": str(tmp_path / "models" / name),
        }
        if files is not None:
            model["files"] = files
        else:
            model["manifest"] = manifest
        data = {"version": 1, "hosts": {"local": {"address": "localhost"}}, "models": {name: model}}
        path = tmp_path / "fleet.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return make
