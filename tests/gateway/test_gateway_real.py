"""The front door for real: a real LiteLLM proxy in front of two real llama-servers.

One module-scoped fleet (two cores are shared): the Gemma 3 270M test model
served twice, under two aliases with different per-slot windows
(``gemma3-270m``: 4096 x 2, ``gemma3-270m-wide``: 8192 x 1), brought up by
``up`` (``local.up`` for the services, then ``local.up_front``) with the
pinned LiteLLM that inferfleet's own installer put in the runtime cache.
Every process is stopped by its recorded pid at the end (L-43). Loopback only.

The last test crashes one backend (killed by pid, its record left behind):
it runs last in this module on purpose.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import pytest
import yaml
from helpers import free_port
from helpers.board import board, chromium
from helpers.git import git
from helpers.real_server import state_dir, write_fleet

from inferfleet.backends.process import ProcessBackend
from inferfleet.deploy import frontdoor as front
from inferfleet.deploy import local
from inferfleet.documents import UpFront
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.install import llamacpp_build, pinned_venv
from inferfleet.io import process
from inferfleet.io.archive import Archive
from inferfleet.render import gateway as render
from inferfleet.render.bundle import render_fleet
from inferfleet.status import collect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FIXTURE = Path(__file__).parents[1] / "fixtures" / "fleets" / "gateway.yaml"
NARROW, WIDE = "gemma", "gemma-wide"
ALIASES = {NARROW: "gemma3-270m", WIDE: "gemma3-270m-wide"}


@dataclass
class Front:
    loaded: LoadedFleet
    folder: Path
    state: Path
    key: str
    url: str  # the gateway's base URL, .../v1
    ports: dict[str, int]
    started: UpFront

    def headers(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key if key is None else key}"}


def _metric(port: int, name: str) -> float:
    """One series of a backend's own /metrics (llama-server's counters)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the /metrics of port {port}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    folder = tmp_path_factory.mktemp("front")
    data: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    ports = {NARROW: free_port(), WIDE: free_port()}
    for name, port in ports.items():
        data["services"][name]["port"] = port
    data["gateway"]["port"] = free_port()
    key = "sk-" + secrets.token_urlsafe(24)
    keys = folder / "gateway.env"
    keys.write_text(f"LITELLM_MASTER_KEY={key}\n")
    keys.chmod(0o600)
    data["gateway"]["keys_env"] = str(keys)
    path = write_fleet(folder / "fleet.yaml", data)
    state = folder / "state"
    # A fleet repository, as users keep one: the key file and the state stay untracked (L-55).
    (folder / ".gitignore").write_text("gateway.env\nstate/\n")
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "fleet behind a gateway")
    source = load_fleet(path).fleet.runtimes["llama-cpp"].source
    assert source is not None
    llamacpp_build.install(source)  # cached: built once per machine
    with state_dir(state):
        loaded = load_fleet(path)
        try:
            results = local.up(loaded, [NARROW, WIDE], local.Hooks(), contract=False)
            assert [r.service for r in results] == [NARROW, WIDE]
            started = local.up_front(loaded, "gateway", local.Hooks())
            assert started is not None
            yield Front(
                loaded, folder, state, key, started["url"], ports, started
            )  # fmt: skip
        finally:
            local.down_front(loaded, "gateway", grace=5.0)
            for name in (NARROW, WIDE):
                local.down(loaded, name, grace=5.0)


@pytest.fixture
def at(fleet: Front, monkeypatch: pytest.MonkeyPatch) -> Front:
    """Each test reads the module fleet's state dir (records, logs)."""
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(fleet.state))
    return fleet


def test_up_starts_the_gateway_behind_its_health_gate(at: Front) -> None:
    started = at.started
    assert started["action"] == "started" and started["pid"] is not None
    assert started["engine"] == "litellm 1.106.12"
    assert started["unhealthy_backends"] == []  # up ran it after both services were healthy
    proc = psutil.Process(started["pid"])
    # The pinned venv's own Python runs LiteLLM's proxy (L-42), never inferfleet's.
    assert proc.cmdline()[:3] == [
        str(pinned_venv.install_dir(front.engine_pin(at.loaded.fleet.gateway)) / "bin/python"),
        "-m",
        "litellm.proxy.proxy_cli",
    ]  # fmt: skip
    ready = httpx.get(at.url.removesuffix("/v1") + render.READINESS_PATH, timeout=10)
    assert ready.status_code == 200


def test_an_idle_client_connection_is_kept_past_uvicorns_default(at: Front) -> None:
    """The gateway keeps an idle connection render.gateway.KEEPALIVE_S seconds, not
    uvicorn's 5: a client (the auth proxy) asking again seconds later reuses it."""
    assert render.KEEPALIVE_S > 6
    address = urlsplit(at.url)
    conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
    try:
        conn.request("GET", render.READINESS_PATH)
        assert conn.getresponse().read() and conn.sock is not None
        first = conn.sock.getsockname()
        time.sleep(6)  # past uvicorn's default keep-alive of 5 s
        conn.request("GET", render.READINESS_PATH)  # closed by the server: RemoteDisconnected
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200 and conn.sock.getsockname() == first  # the same socket
    finally:
        conn.close()


def test_models_lists_both_aliases(at: Front) -> None:
    answer = httpx.get(at.url + "/models", headers=at.headers(), timeout=10)
    assert answer.status_code == 200
    assert {m["id"] for m in answer.json()["data"]} == set(ALIASES.values())


def test_no_key_is_401_and_a_wrong_key_never_reaches_a_backend(at: Front) -> None:
    """No key: 401. A wrong key: refused before any backend, with LiteLLM's own status.

    Without a database LiteLLM checks only the master key; any other key is
    looked up in the key database it does not have and answered ``400
    no_db_connection`` (1.106.12). Either way the backends' counters do not move.
    """
    body = {"model": ALIASES[NARROW], "prompt": "Hello", "max_tokens": 2}
    counter = "llamacpp:prompt_tokens_total"
    before = {name: _metric(port, counter) for name, port in at.ports.items()}
    assert httpx.get(at.url + "/models", timeout=10).status_code == 401
    assert httpx.post(at.url + "/completions", json=body, timeout=30).status_code == 401
    for key in ("wrong", "sk-" + secrets.token_urlsafe(24)):
        refused = httpx.post(
            at.url + "/completions", json=body, headers=at.headers(key), timeout=30
        )
        assert refused.status_code in {400, 401}
        assert refused.json()["error"]["type"] in {"no_db_connection", "auth_error"}
    assert {name: _metric(port, counter) for name, port in at.ports.items()} == before


@pytest.mark.parametrize("target", [NARROW, WIDE])
def test_each_request_reaches_its_own_backend(at: Front, target: str) -> None:
    """The backends' own counters: the alias's server counts the prompt, the other none."""
    other = WIDE if target == NARROW else NARROW
    counter = "llamacpp:prompt_tokens_total"
    before = {name: _metric(port, counter) for name, port in at.ports.items()}
    body = {"model": ALIASES[target], "prompt": "The capital of France is", "max_tokens": 4}
    answer = httpx.post(at.url + "/completions", json=body, headers=at.headers(), timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] >= 1
    after = {name: _metric(port, counter) for name, port in at.ports.items()}
    assert after[target] > before[target]
    assert after[other] == before[other]


def test_the_installed_config_is_the_fleets_contract_without_a_key(at: Front) -> None:
    launch = front.gateway_launch(at.loaded.fleet, _facts(at), at.state)
    written = yaml.safe_load(Path(launch.file("config").path).read_text())
    entries = {m["model_name"]: m for m in written["model_list"]}
    narrow, wide = entries[ALIASES[NARROW]], entries[ALIASES[WIDE]]
    # The real URL each service listens on (its exposure: loopback), per-slot windows (L-25).
    assert narrow["litellm_params"]["api_base"] == f"http://127.0.0.1:{at.ports[NARROW]}/v1"
    assert wide["litellm_params"]["api_base"] == f"http://127.0.0.1:{at.ports[WIDE]}/v1"
    assert narrow["model_info"]["context_window"] == 4096
    assert wide["model_info"]["context_window"] == 8192
    assert (narrow["model_info"]["max_tokens"], wide["model_info"]["max_tokens"]) == (512, 1024)
    # gateway.timeout 20m, gateway.timeouts.gemma-wide 30m: long generations.
    assert narrow["litellm_params"]["timeout"] == 1200.0
    assert wide["litellm_params"]["stream_timeout"] == 1800.0
    assert written["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    # The key is in no rendered or installed file (L-55), nor in the gateway's argv.
    rendered = [a.content for a in render_fleet(at.loaded)]
    installed = [Path(f.path).read_text() for f in launch.files]
    assert not [text for text in rendered + installed if at.key in text]
    assert at.key not in " ".join(psutil.Process(at.started["pid"]).cmdline())


def test_a_second_up_installs_nothing_and_keeps_the_gateway(at: Front, cli: Any) -> None:
    pin = front.engine_pin(at.loaded.fleet.gateway)
    record, installed_now = pinned_venv.install(pin)
    assert installed_now is False and record.version == "1.106.12"
    again = local.up_front(at.loaded, "gateway", local.Hooks())
    assert again is not None
    assert again["action"] == "unchanged" and again["pid"] == at.started["pid"]
    # `up` itself: every service kept, then the gateway, kept too (its JSON document).
    result = cli("up", str(at.loaded.path), "--json", "--no-contract")
    assert result.code == 0, result.stderr + result.stdout
    doc = result.document()
    assert [s["action"] for s in doc["services"]] == ["unchanged", "unchanged"]
    assert doc["gateway"]["action"] == "unchanged" and doc["gateway"]["pid"] == at.started["pid"]
    assert doc["gateway"]["url"] == at.url and doc["gateway"]["engine"] == "litellm 1.106.12"


def test_status_shows_the_gateway_reaching_both_backends(at: Front, cli: Any) -> None:
    status = collect(at.loaded)
    row = status.gateway
    assert row is not None
    assert row.state == "healthy", row.detail
    assert row.pid == at.started["pid"] and row.engine == "litellm 1.106.12"
    assert row.reached == {NARROW: "ok", WIDE: "ok"} and row.unreachable == []
    doc = status.document()
    assert doc["gateway"]["state"] == "healthy"


def test_apply_redeploys_the_gateway_alone_when_only_its_section_changed(
    at: Front, cli: Any
) -> None:
    """A new gateway timeout, committed: apply restarts the gateway, keeps both services."""
    service_pids = {name: _pid(at, name) for name in ALIASES}
    data = yaml.safe_load(at.loaded.path.read_text())
    data["gateway"]["timeout"] = "25m"
    write_fleet(at.loaded.path, data)
    git(at.folder, "commit", "-q", "-am", "a longer gateway timeout")
    result = cli("apply", "--file", str(at.loaded.path), "--host", "local", "--json")
    assert result.code == 0, result.stderr + result.stdout
    done = {o["service"]: o["outcome"] for o in result.document()["done"]}
    assert done == {"gateway": "deployed"}
    assert {name: _pid(at, name) for name in ALIASES} == service_pids
    pid = _pid(at, render.NAME)
    assert pid != at.started["pid"]
    at.started["pid"] = pid
    launch = front.gateway_launch(load_fleet(at.loaded.path).fleet, _facts(at), at.state)
    written = yaml.safe_load(Path(launch.file("config").path).read_text())
    assert written["litellm_settings"]["request_timeout"] == 1500.0
    # The config it replaced was archived first (nothing is deleted).
    kept = [e.index for e in Archive(at.state).entries() if e.index is not None]
    old = [i for i in kept if i.service == render.NAME]
    assert [f.path for i in old for f in i.files] == [launch.file("config").path]
    answer = httpx.get(at.url + "/models", headers=at.headers(), timeout=10)
    assert answer.status_code == 200
    # The same revision again: the gateway answers with the same digest, kept.
    again = cli("apply", "--file", str(at.loaded.path), "--host", "local", "-s", NARROW, "--json")
    assert again.code == 0 and _pid(at, render.NAME) == pid


def _pid(at: Front, name: str) -> int:
    record = ProcessBackend(at.state).records.read(name)
    assert record is not None
    return record.pid


def test_a_stopped_backend_is_a_clear_error_and_a_red_row(at: Front, cli: Any) -> None:
    """Last in the module: the wide backend crashes (killed by its pid, record left)."""
    record = local.backend_for(at.loaded, at.loaded.fleet.services[WIDE]).records.read(WIDE)
    assert record is not None
    with contextlib.suppress(psutil.NoSuchProcess):
        process.terminate(psutil.Process(record.pid), grace=5.0)
    body = {"model": ALIASES[WIDE], "prompt": "Hello", "max_tokens": 2}
    answer = httpx.post(at.url + "/completions", json=body, headers=at.headers(), timeout=120)
    assert answer.status_code >= 500
    error = answer.json()["error"]
    # LiteLLM names the failed connection, and the other alias still answers.
    assert "connect" in str(error).lower(), error
    still = dict(body, model=ALIASES[NARROW])
    ok = httpx.post(at.url + "/completions", json=still, headers=at.headers(), timeout=120)
    assert ok.status_code == 200, ok.text

    status = collect(at.loaded)
    row = status.gateway
    assert row is not None and row.state == "degraded" and row.problem
    assert row.unreachable == [WIDE] and row.reached[NARROW] == "ok"
    assert WIDE in row.detail
    wide = next(s for s in status.services if s.service == WIDE)
    assert wide.problem
    result = cli("status", "--file", str(at.loaded.path), "--no-ssh")
    assert result.code == 1
    assert "degraded" in result.stdout and "cannot reach gemma-wide" in result.stdout


def test_the_board_shows_the_gateway_card_and_the_backend_it_cannot_reach(at: Front) -> None:
    """After the crash above: the board's gateway card is degraded, gemma-wide marked red."""
    with (
        board(at.loaded.path, at.folder / "bench", at.folder / "board.log") as url,
        chromium() as browser,
    ):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        card = '[data-gateway="local"]'
        page.wait_for_selector(f'{card} .badge.state[data-state="degraded"]', timeout=60_000)
        assert page.locator("main h2").all_inner_texts()[0].lower() == "front door"
        assert page.locator(f'{card} li.bad[data-backend="{WIDE}"]').count() == 1
        assert page.locator(f'{card} li.ok[data-backend="{NARROW}"]').count() == 1
        assert "litellm 1.106.12" in page.locator(card).inner_text()


def _facts(at: Front) -> Any:
    from inferfleet.deploy.facts import host_facts

    return host_facts(at.loaded.root)


def test_keys_env_stays_out_of_the_environment_of_the_services(at: Front) -> None:
    """The gateway's key reaches the gateway only: not the llama-servers it fronts."""
    record = local.backend_for(at.loaded, at.loaded.fleet.services[NARROW]).records.read(NARROW)
    assert record is not None
    environ = psutil.Process(record.pid).environ()
    assert at.key not in environ.values() and "LITELLM_MASTER_KEY" not in environ
    gateway_env = psutil.Process(at.started["pid"]).environ()
    assert gateway_env["LITELLM_MASTER_KEY"] == at.key
    assert os.environ.get("LITELLM_MASTER_KEY") != at.key
