"""A swap group on the real llama-server b11434 in router mode.

One router for the module, started by ``inferfleet up`` (process backend), with
the test model under two aliases and two windows, one member at a time and
``small`` as the default member. Stopped by its recorded pid (L-43).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from group_fleet import BIG, BIG_ALIAS, GROUP, SMALL, SMALL_ALIAS, group_data, write
from helpers import free_port
from helpers.asgi_server import serving
from helpers.board import board, chromium
from helpers.cli import CliResult
from helpers.real_server import environ, wait_for
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from inferfleet import paths
from inferfleet.client.router import ensure_loaded
from inferfleet.deploy import local, operate
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.probe.contract import member_load
from inferfleet.status.collect import Options, collect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

Cli = Callable[..., CliResult]


@dataclass(frozen=True)
class Router:
    loaded: LoadedFleet
    url: str
    pid: int
    state: Path
    home: Path
    hub_asked: list[str]  # requests the fleet's own model endpoint got (none may come)


def _recorder(seen: list[str]) -> Starlette:
    async def anything(request: Request) -> PlainTextResponse:
        seen.append(f"{request.method} {request.url.path}")
        return PlainTextResponse("not found", status_code=404)

    return Starlette(routes=[Route("/{rest:path}", anything, methods=["GET", "HEAD", "POST"])])


@pytest.fixture(scope="module")
def hub_asked() -> Iterator[tuple[str, list[str]]]:
    """A model endpoint on loopback that records what it is asked: the fleet names it as
    the members' MODEL_ENDPOINT, and the router must never ask it (ROUTER_ENV wins)."""
    seen: list[str] = []
    with serving(_recorder(seen)) as url:
        yield url, seen


@pytest.fixture(scope="module")
def router(
    tmp_path_factory: pytest.TempPathFactory, hub_asked: tuple[str, list[str]]
) -> Iterator[Router]:
    base = tmp_path_factory.mktemp("group")
    port = free_port()
    data = group_data(port)
    endpoint, seen = hub_asked
    for member in data["services"].values():
        member["runtime_env"] = {"MODEL_ENDPOINT": endpoint, "HF_ENDPOINT": endpoint}
    fleet_file = write(base / "fleet" / "fleet.yaml", data)
    # The presets go to the user's config dir (unit scope user): a HOME of the test's
    # own; the runtime and the model stay in the shared cache.
    env = {
        "INFERFLEET_CACHE_DIR": str(paths.cache_dir()),
        "HOME": str(base / "home"),
        "INFERFLEET_STATE_DIR": str(base / "state"),
    }
    with environ(**env):
        loaded = load_fleet(fleet_file)
        try:
            [result] = local.up(loaded, [GROUP], local.Hooks(), contract=False)
            assert result.pid is not None
            yield Router(
                loaded,
                f"http://127.0.0.1:{port}",
                result.pid,
                base / "state",
                base / "home",
                seen,
            )
        finally:
            local.down(loaded, GROUP, grace=10.0)


def _states(router: Router) -> dict[str, str]:
    body = httpx.get(f"{router.url}/models", timeout=5).json()
    return {m["id"]: m["status"]["value"] for m in body["data"]}


def _complete(router: Router, alias: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{router.url}/completion",
        json={"model": alias, "prompt": "The sky is", "n_predict": 4},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def test_one_unit_runs_the_router_with_the_rendered_presets(router: Router) -> None:
    preset = router.home / ".config" / "inferfleet" / "presets" / f"{GROUP}.ini"
    text = preset.read_text()
    assert f"[{SMALL_ALIAS}]" in text and f"[{BIG_ALIAS}]" in text
    records = list((router.state).rglob("*.json"))
    assert any(GROUP in p.name for p in records), records
    # The default member is loaded at start (load-on-startup).
    assert wait_for("the default member to load", lambda: _states(router)[SMALL_ALIAS] == "loaded")


def test_a_request_for_the_unloaded_member_loads_it_and_unloads_the_other(router: Router) -> None:
    _complete(router, SMALL_ALIAS)
    assert _states(router) == {SMALL_ALIAS: "loaded", BIG_ALIAS: "unloaded"}
    done = _complete(router, BIG_ALIAS)
    assert done["model"] == BIG_ALIAS
    # max_loaded 1: the router's LRU unloaded the small member to make room.
    assert wait_for(
        "the swap",
        lambda: _states(router) == {SMALL_ALIAS: "unloaded", BIG_ALIAS: "loaded"},
    )
    # The member runs with its own window x slots and cache types (its preset).
    slots = httpx.get(f"{router.url}/slots", params={"model": BIG_ALIAS}, timeout=5).json()
    assert [s["n_ctx"] for s in slots] == [4096, 4096]


def test_status_names_the_loaded_member(router: Router) -> None:
    _complete(router, BIG_ALIAS)
    with environ(INFERFLEET_STATE_DIR=str(router.state), HOME=str(router.home)):
        status = collect(router.loaded, options=Options(ssh=False, timeout=5.0))
    [row] = status.services
    assert row.service == GROUP
    assert row.state == "healthy", row.detail
    assert row.pid == router.pid
    assert row.members == {SMALL_ALIAS: "unloaded", BIG_ALIAS: "loaded"}
    assert row.model == f"loaded: {BIG_ALIAS}"
    assert row.to_json()["members"] == row.members


def test_up_again_keeps_the_running_router(router: Router) -> None:
    with environ(
        INFERFLEET_STATE_DIR=str(router.state),
        HOME=str(router.home),
        INFERFLEET_CACHE_DIR=str(paths.cache_dir()),
    ):
        [again] = local.up(router.loaded, [GROUP], local.Hooks(), contract=False)
    assert again.action == "unchanged", again.reason
    assert again.pid == router.pid


def test_a_cold_member_load_is_its_own_figure(router: Router) -> None:
    _complete(router, BIG_ALIAS)  # the small member is now unloaded
    cold = ensure_loaded(router.url, SMALL_ALIAS)
    assert cold is not None and cold.before == "unloaded" and cold.seconds > 0
    assert _states(router)[SMALL_ALIAS] == "loaded"
    assert ensure_loaded(router.url, SMALL_ALIAS) is None  # warm: nothing to load
    # The probe reports it as its own result before any timed check.
    _complete(router, BIG_ALIAS)
    result = member_load(router.url, SMALL_ALIAS)
    assert result is not None and result.status == "pass"
    assert "was unloaded; the router loaded it in" in result.summary


def test_bench_of_a_cold_member_keeps_its_load_out_of_ttft(
    router: Router, cli: Cli, tmp_path: Path
) -> None:
    _complete(router, SMALL_ALIAS)  # the big member is now unloaded
    args = ["--runs", "1", "-c", "1", "--prompts", "1", "--max-tokens", "128", "--json"]
    fleet_file = str(router.loaded.path)
    first = cli("bench", BIG, "-f", fleet_file, "--out", str(tmp_path / "a"), *args)
    assert first.code == 0, first.stderr
    (arm,) = first.document()["arms"]
    assert arm["model"] == BIG_ALIAS and arm["cold_load_s"] > 0
    again = cli("bench", BIG, "-f", fleet_file, "--out", str(tmp_path / "b"), *args)
    assert again.code == 0, again.stderr
    (warm,) = again.document()["arms"]
    assert warm["cold_load_s"] is None


def test_status_json_and_logs_of_the_group(
    router: Router, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _complete(router, SMALL_ALIAS)
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(router.state))
    monkeypatch.setenv("HOME", str(router.home))
    fleet_file = str(router.loaded.path)
    doc = cli("status", "-f", fleet_file, "--json", "--no-ssh").document()
    (row,) = doc["services"]
    assert row["service"] == GROUP and row["state"] == "healthy"
    assert row["members"] == {SMALL_ALIAS: "loaded", BIG_ALIAS: "unloaded"}
    logs = cli("logs", GROUP, "-f", fleet_file, "-n", "400")
    assert logs.code == 0, logs.stderr
    assert "models-preset" in logs.stdout or SMALL_ALIAS in logs.stdout


def test_the_board_shows_which_member_is_loaded(router: Router, tmp_path: Path) -> None:
    _complete(router, BIG_ALIAS)
    with (
        environ(INFERFLEET_STATE_DIR=str(router.state), HOME=str(router.home)),
        board(router.loaded.path, tmp_path / "bench", tmp_path / "board.log") as url,
        chromium() as browser,
    ):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        card = f'[data-service="{GROUP}"]'
        page.wait_for_selector(f'{card} .badge.state[data-state="healthy"]', timeout=60_000)
        text = page.locator(card).inner_text()
    assert f"loaded: {BIG_ALIAS}" in text
    assert f"{BIG_ALIAS}: loaded" in text and f"{SMALL_ALIAS}: unloaded" in text


def test_a_load_waits_for_a_busy_member_instead_of_failing(router: Router) -> None:
    """The router answers 500 "model limit reached" to a load while the only slot's
    member is busy; the cold load is asked again until that request is done."""
    _complete(router, SMALL_ALIAS)
    done: dict[str, int] = {}

    def busy() -> None:
        body = {"model": SMALL_ALIAS, "prompt": "Once", "n_predict": 160, "ignore_eos": True}
        done["status"] = httpx.post(f"{router.url}/completion", json=body, timeout=300).status_code

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        wait_for("the small member to be busy", lambda: _processing(router, SMALL_ALIAS))
        refused = httpx.post(f"{router.url}/models/load", json={"model": BIG_ALIAS}, timeout=30)
        assert refused.status_code == 500 and "model limit reached" in refused.text
        cold = ensure_loaded(router.url, BIG_ALIAS)
    finally:
        worker.join(timeout=300)
    assert done == {"status": 200}
    assert cold is not None and cold.before == "unloaded"
    assert _states(router) == {SMALL_ALIAS: "unloaded", BIG_ALIAS: "loaded"}


def _processing(router: Router, alias: str) -> bool:
    slots = httpx.get(f"{router.url}/slots", params={"model": alias}, timeout=5).json()
    return any(s.get("is_processing") for s in slots)


# ---------------------------------------------------------------- closed by default (L-58)

FOREIGN_REPO = "someone/any-GGUF:Q4_K_M"
EVIL = "https://evil.example"


def test_post_models_with_a_foreign_repo_downloads_nothing(router: Router) -> None:
    """b11434's POST /models fetches any Hub repo (``--offline`` does not reach it) and
    answers ``{"success": true}`` before its download child even starts; the router's
    environment points its model endpoint at a port nothing answers (ROUTER_ENV), over the
    one the fleet names, so nothing is asked, fetched, listed or served."""
    environ_of = Path(f"/proc/{router.pid}/environ").read_bytes().split(b"\0")
    assert b"MODEL_ENDPOINT=http://127.0.0.1:1/" in environ_of
    httpx.post(f"{router.url}/models", json={"model": FOREIGN_REPO}, timeout=120)
    asked = httpx.post(
        f"{router.url}/completion", json={"model": FOREIGN_REPO, "prompt": "x"}, timeout=60
    )
    assert asked.status_code == 400 and "not found" in asked.text
    time.sleep(2.0)  # the download child has run and exited by now
    assert set(_states(router)) == {SMALL_ALIAS, BIG_ALIAS}  # no new entry
    assert router.hub_asked == []  # the fleet's endpoint was never asked
    assert not Path("/dev/null/llama.cpp").exists()


@pytest.mark.parametrize("path", ["/models", "/models/unload", "/v1/chat/completions"])
def test_a_cross_origin_preflight_fails(router: Router, path: str) -> None:
    headers = {
        "Origin": EVIL,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    answer = httpx.options(f"{router.url}{path}", headers=headers, timeout=10)
    # A browser sends the real request only if the answer names its origin (or *).
    assert answer.headers.get("access-control-allow-origin") not in {EVIL, "*"}
    assert answer.headers.get("access-control-allow-credentials") != "true"


def test_a_members_answer_names_no_foreign_origin(router: Router) -> None:
    """The router passes a member's own headers on: the member is closed too (its preset)."""
    answer = httpx.post(
        f"{router.url}/completion",
        json={"model": SMALL_ALIAS, "prompt": "The sky is", "n_predict": 2},
        headers={"Origin": EVIL},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    assert EVIL not in answer.headers.get_list("access-control-allow-origin")


def test_probe_reads_a_loaded_members_window_and_metrics_through_the_router(
    router: Router, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The router's own /props says n_ctx 0 and its /metrics wants ?model=: a member's
    facts are its own server's, read with ?model=ALIAS&autoload=false."""
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(router.state))
    monkeypatch.setenv("HOME", str(router.home))
    own = httpx.get(f"{router.url}/props", timeout=5).json()
    assert own["role"] == "router" and own["default_generation_settings"]["n_ctx"] == 0
    assert httpx.get(f"{router.url}/metrics", timeout=5).status_code == 400
    for member, window, slots in ((BIG, 4096, 2), (SMALL, 2048, 1)):
        done = cli("probe", member, "-f", str(router.loaded.path), "--json")
        doc = done.document()
        checks = {c["id"]: c for c in doc["checks"]}
        assert doc["findings"]["n_ctx_slot"] == window, checks
        assert doc["findings"]["total_slots"] == slots
        assert checks["metrics"]["status"] == "pass", checks["metrics"]
        assert done.code == 0, [c for c in doc["checks"] if c["status"] == "fail"]


def test_the_contract_gate_checks_every_members_window(router: Router) -> None:
    """What up and apply run after the health gate: per member, as for a single service."""
    from inferfleet.probe.minimal import run_contract

    for alias, window in ((BIG_ALIAS, 4096), (SMALL_ALIAS, 2048)):
        right = run_contract(router.url, alias=alias, ctx_per_slot=window, service=GROUP)
        names = [c.name for c in right.checks]
        assert "context per slot" in names and right.ok, right.checks
        wrong = run_contract(router.url, alias=alias, ctx_per_slot=window * 2, service=GROUP)
        assert not wrong.ok
        assert f"reports n_ctx {window} per slot" in " ".join(wrong.evidence)


def test_restart_runs_the_contract_per_member(router: Router, cli: Cli) -> None:
    """The last test of the module: it replaces the router (a new pid), as a user's would."""
    with environ(
        INFERFLEET_STATE_DIR=str(router.state),
        HOME=str(router.home),
        INFERFLEET_CACHE_DIR=str(paths.cache_dir()),
    ):
        done = operate.restart(router.loaded, GROUP, local.Hooks())
    assert done.action == "restarted" and done.contract == "passed", done.evidence
    names = [c.name for c in done.checks]
    for alias in (BIG_ALIAS, SMALL_ALIAS):
        assert f"{alias}: context per slot" in names, names
    # The default member is probed last: it is the one loaded afterwards.
    assert names[-1].startswith(SMALL_ALIAS)
    assert wait_for("the default member", lambda: _states(router)[SMALL_ALIAS] == "loaded")
