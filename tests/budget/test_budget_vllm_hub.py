"""``budget`` of a vLLM service whose safetensors model is on the (test) Hub only.

config.json is read whole, each weight file only its 8 + N header bytes by
range requests (the Hub-shaped loopback server of tests/hub logs each one),
and the facts are cached: a second run, even ``--offline``, asks nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT
from helpers.cli import run_cli
from safetensors.numpy import save_file
from st_models import TINY_CONFIG, declared, vllm_fleet, write_model

sys.path.insert(0, str(ROOT / "tests" / "checks"))
sys.path.insert(0, str(ROOT / "tests" / "hub"))

from hub_content import Blob, Repo, RepoFile  # noqa: E402 - tests/hub is put on the path just above
from remote_fleet import (  # noqa: E402 - tests/checks is put on the path just above
    HubServer,
    hub_env_fixture,  # noqa: F401 - the hub_env fixture
)


def test_hub_model_is_sized_from_ranges_then_from_the_cache(
    tmp_path: Path, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = write_model(tmp_path / "src", sharded=True)
    files = [
        RepoFile(p.name, Blob([p.read_bytes()]).hashed(), lfs=p.suffix == ".safetensors")
        for p in sorted((tmp_path / "src").iterdir())
    ]
    with HubServer() as hub:
        hub.add(Repo("test/tiny-llama", {f.path: f for f in files}))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        fleet = vllm_fleet(
            tmp_path,
            {"hub": "test/tiny-llama", "revision": "main"},
            declared(tmp_path / "src"),
        )
        first = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
        assert first.code == 0, first.stdout + first.stderr
        (doc,) = json.loads(first.stdout)["vllm"]
        assert (doc["weights_on_disk"], doc["tokens"]) == (weights, 512_000)
        shard_reads = [r for r in hub.log if r.host == "cdn" or "safetensors" in r.path]
        assert shard_reads and all(r.range is not None for r in hub.log if r.host == "cdn")
        before = len(hub.log)
        again = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json", "--offline")
        assert again.code == 0, again.stdout + again.stderr
        assert json.loads(again.stdout)["vllm"][0]["tokens"] == 512_000
        assert len(hub.log) == before  # the second run read the cache only


def test_hub_model_header_bytes_only(
    tmp_path: Path, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 3 MiB weight file: the budget reads its header by range, not the file."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_CONFIG))
    save_file({"big": np.zeros((768, 1024), dtype=np.float32)}, str(folder / "model.safetensors"))
    files = [
        RepoFile(p.name, Blob([p.read_bytes()]).hashed(), lfs=p.suffix == ".safetensors")
        for p in sorted(folder.iterdir())
    ]
    with HubServer() as hub:
        hub.add(Repo("test/big", {f.path: f for f in files}))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        fleet = vllm_fleet(tmp_path, {"hub": "test/big", "revision": "main"}, declared(folder))
        result = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
        assert result.code == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["vllm"][0]["weights"] == 768 * 1024 * 4
        size = (folder / "model.safetensors").stat().st_size
        sent = sum(n for path, n in hub.sent.items() if path.endswith("model.safetensors"))
        assert 0 < sent < size // 10


def test_a_damaged_cache_entry_is_read_again_and_replaced(
    tmp_path: Path, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_model(tmp_path / "src")
    files = [
        RepoFile(p.name, Blob([p.read_bytes()]).hashed(), lfs=p.suffix == ".safetensors")
        for p in sorted((tmp_path / "src").iterdir())
    ]
    with HubServer() as hub:
        hub.add(Repo("test/tiny", {f.path: f for f in files}))
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        fleet = vllm_fleet(
            tmp_path, {"hub": "test/tiny", "revision": "main"}, declared(tmp_path / "src")
        )
        assert run_cli(monkeypatch, "budget", "-f", str(fleet)).code == 0
        (entry,) = (hub_env / "headers").iterdir()
        entry.write_text('{"format": 1, "kind": "safetensors", "files": [{"file_size": -1}]}')
        offline = run_cli(monkeypatch, "budget", "-f", str(fleet), "--offline", "tiny")
        assert offline.code == 2 and "not cached" in " ".join(offline.stderr.split())
        before = len(hub.log)
        again = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
        assert again.code == 0 and json.loads(again.stdout)["vllm"][0]["tokens"] == 512_000
        assert len(hub.log) > before  # read from the Hub again ...
        assert json.loads(entry.read_text())["files"][0]["file_size"] > 0  # ... and replaced
