"""Every verb that could reach the Hub honours ``--offline`` (and HF_HUB_OFFLINE=1), and an
endpoint that refuses or does not resolve is final after one try: no retry loop, no sleep."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
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


@pytest.fixture(name="index_log")
def index_log_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A package index on loopback that logs every request (pip is pointed at it)."""
    from helpers.asgi_server import serving
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    log: list[str] = []

    async def app_404(request: Request) -> Response:
        log.append(request.url.path)
        return Response(status_code=404)

    app = Starlette()
    app.add_route("/{path:path}", app_404)
    with serving(app) as url:
        monkeypatch.setenv("PIP_INDEX_URL", f"{url}/simple")
        monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
        monkeypatch.delenv("PIP_NO_INDEX", raising=False)
        yield log


OFFLINE_VERBS: dict[str, list[str]] = {
    "models manifest": ["models", "manifest", "test/gemma-whole"],
    "models fetch": ["models", "fetch", "m", "--file", "{fleet}"],
    "add": [
        "add",
        "test/gemma-whole:Q4_K_M",
        "--host",
        "local",
        "--ctx",
        "4096",
        "--file",
        "{fleet}",
    ],
    "runtime install": ["runtime", "install", "llama.cpp", "--file", "{fleet}"],
    "up": ["up", "--file", "{fleet}", "--no-contract"],
    "budget": ["budget", "--file", "{fleet}"],
}


# HF_HUB_OFFLINE=1 keeps the Hub off; --offline also keeps pip off its index (a build).
CASES = [(verb, how) for verb in sorted(OFFLINE_VERBS) for how in ("--offline", "HF_HUB_OFFLINE=1")
         if how == "--offline" or verb not in {"runtime install", "up"}]  # fmt: skip


@pytest.mark.parametrize(("verb", "how"), CASES)
def test_every_network_verb_offline_sends_no_request(
    hub: HubServer,
    index_log: list[str],
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_sleep: list[float],
    verb: str,
    how: str,
) -> None:
    # The runtime is not built in this test's cache and the model not fetched: online,
    # each verb would ask the test Hub or the package index (both log every request).
    path = fleet(tmp_path, {"hub": "test/gemma-whole", "revision": "main"},
                 model_dir=tmp_path / "not-fetched")  # fmt: skip
    args = [a.replace("{fleet}", str(path)) for a in OFFLINE_VERBS[verb]]
    if how == "--offline":
        args.append("--offline")
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = cli(*args)
    assert hub.log == [] and index_log == [], (hub.log, index_log)
    assert "Traceback" not in result.stdout + result.stderr
    if verb not in {"up", "runtime install"}:  # (they poll pip's process while it runs)
        assert no_sleep == []  # refused at once, never retried
    said = " ".join((result.stdout + result.stderr).split())
    if verb == "budget":  # it reports the unsized model and goes on
        assert "no network request was made" in said, said
    else:  # the refusal says why: offline, not an unreachable endpoint
        assert result.code != 0 and "internal error" not in said, said
        assert "offline" in said.lower(), said
    if how == "--offline":
        assert "HF_HUB_OFFLINE" not in os.environ and "PIP_NO_INDEX" not in os.environ


def test_deploy_offline_runs_each_hosts_apply_offline(tmp_path: Path) -> None:
    from inferfleet.cli.fleet_cmds import embedded_example
    from inferfleet.deploy import noop, rollout
    from inferfleet.deploy.ssh import connector_for
    from inferfleet.fleetfile.loader import load_fleet

    loaded = load_fleet(embedded_example())
    side = rollout.Fleetside(None, "fleet.yaml", loaded, "a" * 40)  # type: ignore[arg-type]
    conn = connector_for("local", loaded.fleet.hosts["local"], repository=tmp_path)
    assert "--offline" not in side.apply_command(conn, "local", "--events")
    side.offline = True
    line = side.apply_command(conn, "local", "--pull", "--expect", "b" * 40, "--events")
    assert line.endswith("--events --offline"), line
    # The host's no-op memo still answers that form (a no-op reaches neither Hub nor index).
    argv = ["--host", "local", "--pull", "--expect", "b" * 40, "--events", "--offline"]
    assert noop.deploy_form(argv) is not None
