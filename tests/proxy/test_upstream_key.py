"""L-58: every front that reaches a server beyond loopback sends that server's key, read
from its own key file at run time, never written into what it renders.

- the auth proxy replaces the client's key (the proxy's) by the upstream's
  (``header_up Authorization "Bearer {env.INFERFLEET_KEY_<SERVICE>}"``); the
  real Caddy validates it, and a key file without that variable is refused
  before Caddy starts;
- the gateway's LiteLLM entry names ``os.environ/INFERFLEET_KEY_<SERVICE>``; a
  gateway key file without it is refused;
- inferfleet itself finds the key in the service's secrets_env on its own host,
  else in ``INFERFLEET_KEY_<SERVICE>``.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import SERVICE, fleet_data, write_fleet

from inferfleet.client.keys import service_key
from inferfleet.deploy import frontdoor as deploy_gateway
from inferfleet.errors import FleetError
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.install import caddy as caddy_tool
from inferfleet.render import caddy, gateway
from inferfleet.render.service_keys import front_variable

ADDRESS = "10.0.0.5"
LAN = {"level": "lan", "reason": "the proxy on another host reaches it"}
VARIABLE = front_variable(SERVICE)


def keyed_fleet(tmp_path: Path, secrets_env: Path, **top: Any) -> LoadedFleet:
    data = fleet_data(8080, bind=ADDRESS, exposure=LAN, secrets_env=str(secrets_env))
    host = next(iter(data["hosts"]))
    for name, section in top.items():
        data[name] = {"host": host, **section}
    return load_fleet(write_fleet(tmp_path / "fleet.yaml", data))


PROXY = {
    "bind": "127.0.0.1",
    "port": 8443,
    "exposure": {"level": "lan", "reason": "clients on this machine"},
    "auth": "bearer",
    "keys_env": "k.env",
    "services": [SERVICE],
}


def test_the_proxy_sends_the_upstreams_key_and_caddy_takes_it(
    tmp_path: Path, caddy_binary: Path
) -> None:
    fleet = keyed_fleet(tmp_path, tmp_path / "s.env", proxy=PROXY).fleet
    text = caddy.caddyfile(fleet, "local")
    assert f'header_up Authorization "Bearer {{env.{VARIABLE}}}"' in text
    caddy_tool.validate(text, caddy_binary, where="keyed upstream")
    names = list(caddy.key_names(fleet))
    assert names == ["INFERFLEET_PROXY_KEY", VARIABLE]  # the clients' key first
    client_key, upstream_key = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    env = caddy_tool.environment(
        names, f"INFERFLEET_PROXY_KEY={client_key}\n{VARIABLE}={upstream_key}\n", tmp_path
    )
    assert env[VARIABLE] == upstream_key
    with pytest.raises(FleetError) as refused:
        caddy_tool.environment(names, f"INFERFLEET_PROXY_KEY={client_key}\n", tmp_path)
    assert VARIABLE in refused.value.message and upstream_key not in refused.value.render()


def test_the_gateway_names_the_backends_key_and_refuses_a_key_file_without_it(
    tmp_path: Path,
) -> None:
    fleet = keyed_fleet(tmp_path, tmp_path / "s.env", gateway={"keys_env": "g.env"}).fleet
    (entry,) = gateway.config(fleet)["model_list"]
    assert entry["litellm_params"]["api_key"] == f"os.environ/{VARIABLE}"
    master = "sk-" + secrets.token_hex(16)
    path = tmp_path / "g.env"
    with pytest.raises(FleetError) as refused:
        deploy_gateway.backend_keys(fleet, {"LITELLM_MASTER_KEY": master}, path)
    said = refused.value.render()
    assert VARIABLE in said and "beyond loopback" in said and master not in said
    deploy_gateway.backend_keys(fleet, {"LITELLM_MASTER_KEY": master, VARIABLE: "k" * 24}, path)


def test_inferfleet_finds_the_key_on_the_host_else_in_its_environment(tmp_path: Path) -> None:
    file = tmp_path / "s.env"
    file.write_text("HF_TOKEN=x\nLLAMA_API_KEY=from-the-file\n")
    file.chmod(0o600)
    loaded = keyed_fleet(tmp_path, file)
    assert service_key(loaded, SERVICE, {}) == "from-the-file"  # its host is this machine
    file.write_text("HF_TOKEN=x\n")
    assert service_key(loaded, SERVICE, {VARIABLE: "from-env"}) == "from-env"
    assert service_key(loaded, SERVICE, {}) is None
    remote = fleet_data(8080, bind=ADDRESS, exposure=LAN, secrets_env=str(file))
    remote["hosts"]["local"]["address"] = "10.0.0.9"  # another machine: its file is there
    file.write_text("LLAMA_API_KEY=from-the-file\n")
    loaded = load_fleet(write_fleet(tmp_path / "remote" / "fleet.yaml", remote))
    assert service_key(loaded, SERVICE, {}) is None
    assert service_key(loaded, SERVICE, {VARIABLE: "from-env"}) == "from-env"
