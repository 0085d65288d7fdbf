"""Every verb that could reach the Hub honours ``--offline`` (and HF_HUB_OFFLINE=1), and an
endpoint that refuses or does not resolve is final after one try: no retry loop, no sleep."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port
from remote_fleet import (  # noqa: F401 - fixtures
    HubServer,
    fleet,
    hub_env_fixture,
    hub_fixture,
    model_blobs_fixture,
)

Cli = Callable[..., Any]


@pytest.fixture(name="no_sleep")
def no_sleep_fixture(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)  # a retry loop would sleep between tries
    return slept


@pytest.mark.parametrize("ref", ["org/repo:Q4_K_M", "hf://org/repo/m.gguf"])
def test_gguf_inspect_on_a_refusing_hub_fails_at_once(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, hub_env: Path, no_sleep: list[float], ref: str
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    result = cli("gguf", "inspect", ref)
    assert result.code != 0 and no_sleep == []
    said = " ".join(result.stderr.split())
    assert "cannot be reached: connection refused" in said, said
    assert "Traceback" not in said and "Retrying" not in said


def test_gguf_inspect_offline_sends_nothing(hub: HubServer, cli: Cli, hub_env: Path) -> None:
    result = cli("gguf", "inspect", "--offline", "test/gemma-whole:Q4_K_M")
    assert result.code != 0 and hub.log == []
    assert "HF_HUB_OFFLINE" in result.stderr and "Traceback" not in result.stderr
    assert "HF_HUB_OFFLINE" not in os.environ  # the verb's --offline ends with it


def test_render_offline_sends_nothing(
    hub: HubServer, cli: Cli, tmp_path: Path, hub_env: Path
) -> None:
    path = fleet(tmp_path, {"hub": "test/gemma-whole", "revision": "main"},
                 model_dir=tmp_path / "not-fetched")  # fmt: skip
    result = cli("render", "--file", str(path), "--out", str(tmp_path / "out"), "--offline")
    assert hub.log == [], hub.log
    assert result.code in (0, 1), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
