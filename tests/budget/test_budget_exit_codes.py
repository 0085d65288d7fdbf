"""``inferfleet budget`` exit codes: 1 "does not fit", 2 "could not size" (with the reason).

The model is not on this machine: budget reads its header from the test Hub
(loopback, the real Gemma 3 270M) by default, as ``check`` does, through the
same cached header source.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, free_port

sys.path.insert(0, str(ROOT / "tests" / "checks"))

from remote_fleet import (  # noqa: E402 - tests/checks is put on the path just above
    HubServer,
    fleet,
    hub_env_fixture,  # noqa: F401 - the hub_env fixture
    hub_fixture,  # noqa: F401 - the hub fixture
    model_blobs_fixture,  # noqa: F401 - the model_blobs fixture
)

Cli = Callable[..., Any]
WHOLE = "test/gemma-whole"


def _fleet(tmp_path: Path, memory: str = "2GiB") -> Path:
    path = fleet(tmp_path, {"hub": WHOLE, "revision": "main"}, model_dir=tmp_path / "not-here")
    path.write_text(path.read_text().replace("memory: 2GiB", f"memory: {memory}"))
    return path


def test_absent_hub_model_is_sized_from_its_remote_header_by_default(
    hub: HubServer, cli: Cli, tmp_path: Path
) -> None:
    path = _fleet(tmp_path)
    result = cli("budget", "-f", str(path), "--json")
    assert result.code == 0, result.stderr
    (service,) = json.loads(result.stdout)["services"]
    assert service["fits"] is True
    assert 1 <= len([r for r in hub.log if r.method == "GET" and r.range]) <= 4
    before = len(hub.log)
    assert cli("budget", "-f", str(path)).code == 0 and len(hub.log) == before  # cached


def test_does_not_fit_exits_1(hub: HubServer, cli: Cli, tmp_path: Path) -> None:
    result = cli("budget", "-f", str(_fleet(tmp_path, memory="256MiB")))
    assert result.code == 1, result.stdout + result.stderr
    assert "does not fit" in result.stdout


def test_could_not_size_exits_2_with_the_reason(hub: HubServer, cli: Cli, tmp_path: Path) -> None:
    path = _fleet(tmp_path)
    named = cli("budget", "chat", "-f", str(path), "--offline")
    assert named.code == 2 and hub.log == []
    assert "could not size model 'm'" in named.stderr and "drop --offline" in named.stderr
    fleet_wide = cli("budget", "-f", str(path), "--offline", "--json")
    assert fleet_wide.code == 2
    (skip,) = json.loads(fleet_wide.stdout)["skipped"]
    assert skip["service"] == "chat" and "--offline: no network request" in skip["reason"]


def test_unreachable_hub_exits_2_not_1(
    cli: Cli, tmp_path: Path, hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    result = cli("budget", "-f", str(_fleet(tmp_path)))
    assert result.code == 2
    said = " ".join((result.stdout + result.stderr).split())
    # Refused: final after one try, said once (hub/reach.py).
    assert "cannot be reached: connection refused" in said and "(not retried)" in said


def test_does_not_fit_outranks_could_not_size(hub: HubServer, cli: Cli, tmp_path: Path) -> None:
    path = _fleet(tmp_path, memory="256MiB")
    text = path.read_text()
    # A second model that cannot be sized: its repo does not exist on the Hub.
    text = text.replace(
        "services:",
        "  gone:\n    source: {hub: test/nothing-here, revision: main}\n"
        f"    dir: {tmp_path / 'gone'}\n"
        "    files: [{path: x.gguf, size: 1}]\nservices:",
    )
    text += (
        "  other:\n    host: local\n    runtime: lcpp\n    model: gone\n    port: 8081\n"
        "    ctx_per_slot: 4096\n    devices: [cpu0]\n"
    )
    path.write_text(text)
    result = cli("budget", "-f", str(path))
    assert result.code == 1, result.stdout + result.stderr
    assert "does not fit" in result.stdout and "skipped other" in result.stdout
