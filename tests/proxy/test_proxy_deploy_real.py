"""The auth proxy deployed for real: `up` brings Caddy up in front of the gateway.

One module-scoped fleet (two cores are shared): the Gemma 3 270M test model
on a real llama-server, the pinned LiteLLM gateway in front of it, and the
pinned Caddy (bearer auth, ``tls internal``) in front of the gateway, all on
loopback, brought up as ``up`` does (``local.up``, then ``local.up_front`` for
the gateway and the proxy). Clients trust only the root of Caddy's local CA, read
from its data dir in the state dir. Every process is stopped by its recorded
pid at the end (L-43); the last test is ``down`` itself.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from helpers import free_port
from helpers.board import board, chromium
from helpers.git import git
from helpers.real_server import state_dir, write_fleet

from inferfleet.backends.process import ProcessBackend
from inferfleet.deploy import frontdoor as door
from inferfleet.deploy import local
from inferfleet.deploy.facts import host_facts
from inferfleet.documents import UpFront
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.install import llamacpp_build
from inferfleet.render import caddy as render
from inferfleet.render import proxy as render_proxy
from inferfleet.status import collect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FIXTURE = Path(__file__).parents[1] / "fixtures" / "fleets" / "gateway.yaml"
SERVICE, ALIAS = "gemma", "gemma3-270m"
MAIN_KEY, SPARE_KEY = "INFERFLEET_PROXY_KEY", "PROXY_SPARE_KEY"


@dataclass
class Door:
    loaded: LoadedFleet
    folder: Path
    state: Path
    key: str  # the gateway's master key, one of the proxy's keys
    keys: Path  # the proxy's keys_env
    url: str  # https://127.0.0.1:PORT
    started: UpFront

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(door.ca_root(self.state)))

    def post(self, path: str, key: str | None, body: dict[str, Any]) -> httpx.Response:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        return httpx.post(
            self.url + path, json=body, headers=headers, verify=self.tls(), timeout=60
        )

    def get(self, path: str, key: str | None = None) -> httpx.Response:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        return httpx.get(self.url + path, headers=headers, verify=self.tls(), timeout=30)


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    folder = tmp_path_factory.mktemp("door")
    data: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    del data["services"]["gemma-wide"]  # one backend is enough here (two cores are shared)
    data["gateway"]["timeouts"] = {}
    data["services"][SERVICE]["port"] = free_port()
    data["gateway"]["port"] = free_port()
    key = "sk-" + secrets.token_urlsafe(24)
    data["gateway"]["keys_env"] = str(
        _private(folder / "gateway.env", f"LITELLM_MASTER_KEY={key}\n")
    )
    keys = _private(
        folder / "proxy.env", f"{MAIN_KEY}={key}\n{SPARE_KEY}={secrets.token_urlsafe(24)}\n"
    )
    port = free_port()
    data["proxy"] = {
        "host": "local",
        "bind": "127.0.0.1",
        "port": port,
        "exposure": {"level": "lan", "reason": "the test's clients on this machine"},
        "keys_env": str(keys),
        "key_names": [MAIN_KEY, SPARE_KEY],
    }
    path = write_fleet(folder / "fleet.yaml", data)
    state = folder / "state"
    # A fleet repository, as users keep one: key files and state stay untracked (L-55).
    (folder / ".gitignore").write_text("*.env\nstate/\n")
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "fleet behind a gateway and an auth proxy")
    source = load_fleet(path).fleet.runtimes["llama-cpp"].source
    assert source is not None
    llamacpp_build.install(source)  # cached: built once per machine
    with state_dir(state):
        loaded = load_fleet(path)
        try:
            [result] = local.up(loaded, [SERVICE], local.Hooks(), contract=False)
            assert result.service == SERVICE
            assert local.up_front(loaded, "gateway", local.Hooks()) is not None
            started = local.up_front(loaded, "proxy", local.Hooks())
            assert started is not None
            yield Door(loaded, folder, state, key, keys, f"https://127.0.0.1:{port}", started)
        finally:
            local.down_front(loaded, "proxy", grace=5.0)
            local.down_front(loaded, "gateway", grace=5.0)
            local.down(loaded, SERVICE, grace=5.0)


@pytest.fixture
def at(fleet: Door, monkeypatch: pytest.MonkeyPatch) -> Door:
    """Each test reads the module fleet's state dir (records, logs, Caddy's data)."""
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(fleet.state))
    return fleet


def _pid(at: Door, name: str) -> int:
    record = ProcessBackend(at.state).records.read(name)
    assert record is not None
    return record.pid


def _pids(at: Door) -> dict[str, int]:
    return {name: _pid(at, name) for name in (SERVICE, "gateway", door.PROXY)}


def test_up_starts_caddy_behind_its_own_health_gate(at: Door) -> None:
    started = at.started
    assert started["action"] == "started" and started["url"] == at.url
    assert started["engine"] == f"caddy v{render_proxy.VERSION}"
    assert started["root"] == str(door.ca_root(at.state)) and Path(started["root"]).is_file()
    assert started["pid"] == _pid(at, door.PROXY)
    proc = psutil.Process(started["pid"])
    assert proc.cmdline()[1:3] == ["run", "--config"]
    config = door.proxy_folder(at.state) / "Caddyfile"
    assert proc.cmdline()[3] == str(config)
    # The installed Caddyfile is the rendered one: it names the keys, never their values (L-55).
    text = config.read_text()
    assert text == render.caddyfile(at.loaded.fleet, "local")
    assert at.key not in text and at.key not in " ".join(proc.cmdline())
    # The keys live in Caddy's environment only, not in the gateway's or the backend's.
    assert proc.environ()[MAIN_KEY] == at.key
    spare = proc.environ()[SPARE_KEY]
    for other in ("gateway", SERVICE):
        assert spare not in psutil.Process(_pid(at, other)).environ().values()


def test_the_key_gets_a_completion_through_caddy_and_the_gateway(at: Door) -> None:
    answer = at.post("/v1/completions", at.key, {"model": ALIAS, "prompt": "Hi", "max_tokens": 4})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["choices"] and body["usage"]["completion_tokens"] >= 1


def test_no_key_or_a_wrong_key_is_401_from_caddy(at: Door) -> None:
    body = {"model": ALIAS, "prompt": "Hi", "max_tokens": 4}
    for key in (None, "sk-" + secrets.token_urlsafe(24)):
        answer = at.post("/v1/completions", key, body)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "invalid_api_key"
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    # Its own health route needs no key and says nothing about the upstreams.
    health = at.get(render.HEALTH_PATH)
    assert health.status_code == 200 and health.text == "ok"


def test_status_shows_the_proxy_and_its_upstream(at: Door, cli: Any) -> None:
    status = collect(at.loaded)
    row = status.proxy
    assert row is not None
    assert row.state == "healthy", row.detail
    assert row.pid == _pid(at, door.PROXY) and row.engine == f"caddy v{render_proxy.VERSION}"
    assert row.reached == {"gateway": "ok"} and row.url == at.url
    assert status.document()["proxy"]["state"] == "healthy"
    shown = cli("status", "--file", str(at.loaded.path), "--no-ssh")
    assert shown.code == 0, shown.stderr + shown.stdout
    assert "proxy" in shown.stdout and at.url in shown.stdout


def test_the_board_shows_the_proxy_before_the_gateway(at: Door, tmp_path: Path) -> None:
    """The front door on the board: a card each, the proxy (the clients' way in) first,
    with the upstream it reaches; in a real browser against the real Caddy and LiteLLM."""
    with (
        board(at.loaded.path, tmp_path / "bench", tmp_path / "board.log") as url,
        chromium() as browser,
    ):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        proxy = '[data-proxy="local"]'
        page.wait_for_selector(f'{proxy} .badge.state[data-state="healthy"]', timeout=60_000)
        assert page.locator("main h2").all_inner_texts()[0].lower() == "front door"
        cards = page.locator("#front-door-cards article")
        assert cards.count() == 2
        assert cards.nth(0).get_attribute("data-proxy") == "local"
        assert cards.nth(1).get_attribute("data-gateway") == "local"
        assert page.locator(f'{proxy} li.ok[data-backend="gateway"]').count() == 1
        assert f"caddy v{render_proxy.VERSION}" in page.locator(proxy).inner_text()


def test_a_second_up_keeps_caddy(at: Door, cli: Any) -> None:
    before = _pids(at)
    result = cli("up", str(at.loaded.path), "--json", "--no-contract")
    assert result.code == 0, result.stderr + result.stdout
    doc = result.document()
    assert doc["proxy"]["action"] == "unchanged" and doc["proxy"]["pid"] == before[door.PROXY]
    assert doc["gateway"]["action"] == "unchanged"
    assert _pids(at) == before
    shown = cli("up", str(at.loaded.path), "--no-contract")
    assert shown.code == 0, shown.stderr + shown.stdout
    assert f"proxy: healthy {at.url} (pid {before[door.PROXY]}" in shown.stdout
    assert str(door.ca_root(at.state)) in shown.stdout.replace("\n", "")


def _variant(at: Door, folder: Path, keys_text: str) -> LoadedFleet:
    """The module's fleet with another proxy key file (in a folder of its own)."""
    folder.mkdir(exist_ok=True)
    data = yaml.safe_load(at.loaded.path.read_text())
    data["proxy"]["keys_env"] = str(_private(folder / "proxy.env", keys_text))
    return load_fleet(write_fleet(folder / "fleet.yaml", data))


@pytest.mark.parametrize(
    ("name", "spare", "main", "message"),
    [
        ("weak", "short", None, f"the proxy's key {SPARE_KEY} has 5 characters"),
        ("missing", None, None, f"the proxy's key {SPARE_KEY} is missing"),
        ("other", "x" * 32, "y" * 32, "the gateway's LITELLM_MASTER_KEY is not one of the proxy's"),
    ],
)
def test_bad_keys_are_refused_before_anything_is_written(
    at: Door, tmp_path: Path, name: str, spare: str | None, main: str | None, message: str
) -> None:
    config = door.proxy_folder(at.state) / "Caddyfile"
    before, pids = config.read_bytes(), _pids(at)
    lines = [f"{MAIN_KEY}={main or at.key}"] + ([] if spare is None else [f"{SPARE_KEY}={spare}"])
    loaded = _variant(at, tmp_path / name, "\n".join(lines) + "\n")
    with pytest.raises(door.ProxyKeysError, match=message) as caught:
        door.deploy(loaded.fleet, host_facts(loaded.root), at.state, door.PROXY)
    assert "proxy.keys_env" in (caught.value.where or "")
    assert at.key not in caught.value.render()
    assert config.read_bytes() == before and _pids(at) == pids


def test_a_key_file_others_can_read_is_refused(at: Door, tmp_path: Path) -> None:
    loaded = _variant(at, tmp_path, f"{MAIN_KEY}={at.key}\n{SPARE_KEY}={'z' * 32}\n")
    assert loaded.fleet.proxy is not None and loaded.fleet.proxy.keys_env is not None
    Path(loaded.fleet.proxy.keys_env).chmod(0o644)
    with pytest.raises(door.ProxyKeysError, match="can be read by other users"):
        door.deploy(loaded.fleet, host_facts(loaded.root), at.state, door.PROXY)


def test_a_new_key_restarts_caddy_alone(at: Door) -> None:
    before = _pids(at)
    new = secrets.token_urlsafe(24)
    _private(at.keys, f"{MAIN_KEY}={at.key}\n{SPARE_KEY}={new}\n")
    again = local.up_front(at.loaded, "proxy", local.Hooks())
    assert (
        again is not None and again["action"] == "restarted" and again["reason"] == "spec changed"
    )
    assert again["pid"] != before[door.PROXY] and _gone(before[door.PROXY])
    assert {n: p for n, p in _pids(at).items() if n != door.PROXY} == {
        n: p for n, p in before.items() if n != door.PROXY
    }
    assert psutil.Process(again["pid"]).environ()[SPARE_KEY] == new
    answer = at.post("/v1/completions", at.key, {"model": ALIAS, "prompt": "Hi", "max_tokens": 2})
    assert answer.status_code == 200, answer.text


def test_apply_restarts_caddy_alone_when_its_caddyfile_changed(at: Door, cli: Any) -> None:
    """A route to the service itself (proxy.services), committed: the Caddyfile changes,
    nothing else; apply keeps the gateway and redeploys Caddy."""
    before = _pids(at)
    data = yaml.safe_load(at.loaded.path.read_text())
    data["proxy"]["services"] = [SERVICE]
    write_fleet(at.loaded.path, data)
    git(at.folder, "commit", "-q", "-am", "the service behind the proxy too")
    at.loaded = load_fleet(at.loaded.path)
    result = cli("apply", "--file", str(at.loaded.path), "--host", "local", "--json")
    assert result.code == 0, result.stderr + result.stdout
    done = {o["service"]: o["outcome"] for o in result.document()["done"]}
    assert done == {"gateway": "kept", "proxy": "deployed"}
    after = _pids(at)
    assert after[door.PROXY] != before[door.PROXY]
    assert after[SERVICE] == before[SERVICE] and after["gateway"] == before["gateway"]
    assert f"handle_path /{SERVICE}/*" in (door.proxy_folder(at.state) / "Caddyfile").read_text()
    models = at.get(f"/{SERVICE}/v1/models", at.key)
    assert models.status_code == 200 and models.json()["data"][0]["id"] == ALIAS
    assert at.get(f"/{SERVICE}/v1/models").status_code == 401
    row = collect(at.loaded).proxy
    assert row is not None and row.reached == {SERVICE: "ok", "gateway": "ok"}, row.detail
    # The same revision again: Caddy's digest is unchanged, it is kept.
    again = cli("apply", "--file", str(at.loaded.path), "--host", "local", "--json")
    assert again.code == 0, again.stderr + again.stdout
    assert {o["service"]: o["outcome"] for o in again.document()["done"]} == {
        "gateway": "kept",
        "proxy": "kept",
    }
    assert _pids(at) == after


def _gone(pid: int) -> bool:
    """Stopped: no such process, or a zombie this test process has not reaped yet (the
    servers `up` started here are its children; a zombie holds no port and no memory)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_down_stops_the_proxy_the_gateway_and_the_service_by_pid(at: Door, cli: Any) -> None:
    pids = _pids(at)
    result = cli("down", "--file", str(at.loaded.path), "--json")
    assert result.code == 0, result.stderr + result.stdout
    outcomes = {s["service"]: (s["outcome"], s["pid"]) for s in result.document()["services"]}
    for name, pid in pids.items():
        assert outcomes[name] == ("terminated", pid)
        assert _gone(pid)
    row = collect(at.loaded).proxy
    assert row is not None and row.state == "down" and row.problem
