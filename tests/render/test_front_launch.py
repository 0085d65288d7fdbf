"""The front door's launch has the services' shape: the proxy as a systemd unit, and the
services' actions over a gateway or proxy launch (no marker: a front door has no revision)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from render_helpers import load, run

from inferfleet.deploy.actions import service_actions
from inferfleet.deploy.state import ServiceState
from inferfleet.render import proxy as render_proxy
from inferfleet.render.facts import HostFacts, default_facts
from inferfleet.render.frontdoor import KEYS_KIND, FrontLaunch, with_keys

KEY = "k" * 32


def _proxy_launch(
    backend: str, scope: str = "system", port: int = 443
) -> tuple[FrontLaunch, HostFacts]:
    loaded = load("runtimes")
    fleet = loaded.fleet
    assert fleet.proxy is not None
    proxy = fleet.proxy.model_copy(update={"backend": backend, "scope": scope, "port": port})
    fleet = fleet.model_copy(update={"proxy": proxy})
    facts = default_facts(fleet.hosts[proxy.host])
    launch = render_proxy.proxy_launch(
        fleet, facts, folder="/var/lib/if/proxy", binary="/opt/caddy/bin/caddy", keys_env="/k.env"
    )
    return launch, facts


def test_a_systemd_proxy_is_a_unit_of_the_pinned_caddy_with_keys_from_its_file() -> None:
    launch, facts = _proxy_launch("systemd")
    unit = launch.unit_file
    assert unit is not None and unit.path == "/etc/systemd/system/inferfleet-proxy.service"
    text = unit.content
    assert "ExecStart=/opt/caddy/bin/caddy run --config /var/lib/if/proxy/Caddyfile" in text
    assert "EnvironmentFile=/k.env" in text and KEY not in text
    # Port 443 as the deploying user: the one capability it needs.
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in text
    assert "Environment=XDG_DATA_HOME=/var/lib/if/proxy/data" in text
    assert "Restart=always" in text and "WantedBy=multi-user.target" in text
    keyed = with_keys(launch, {"INFERFLEET_PROXY_KEY": KEY}, facts)
    assert keyed.file(KEYS_KIND).content.strip() == keyed.keys_digest
    assert all(KEY not in f.content for f in keyed.files)
    # A user unit on a high port asks for no capability.
    user, _facts = _proxy_launch("systemd", scope="user", port=8443)
    assert user.unit_file is not None and "AmbientCapabilities" not in user.unit_file.content
    assert user.unit_file.path.endswith("/.config/systemd/user/inferfleet-proxy.service")


def test_a_process_proxy_installs_only_its_caddyfile() -> None:
    launch, facts = _proxy_launch("process")
    keyed = with_keys(launch, {"INFERFLEET_PROXY_KEY": KEY}, facts)
    assert [f.kind for f in keyed.files] == ["config"]
    assert keyed.health_url == "https://10.0.0.7:443/healthz"
    assert keyed.process_env({"PATH": "/bin"})["INFERFLEET_PROXY_KEY"] == KEY


def test_the_systemd_proxy_unit_passes_systemd_analyze_verify(
    systemd_analyze: str, verify_root: Callable[[list[str]], Path]
) -> None:
    launch, _facts = _proxy_launch("systemd")
    unit = launch.unit_file
    assert unit is not None
    root = verify_root(["/opt/caddy/bin/caddy"])
    (root / "k.env").write_text(f"INFERFLEET_PROXY_KEY={KEY}\n")
    name = Path(unit.path).name
    (root / "etc/systemd/system" / name).write_text(unit.content)
    result = run(
        [systemd_analyze, f"--root={root}", "verify", "--man=no", f"/etc/systemd/system/{name}"]
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and output == "", output


def _state(**changes: object) -> ServiceState:
    return replace(ServiceState("proxy"), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["process", "systemd"])
def test_front_door_actions_are_the_services_without_a_marker(backend: str) -> None:
    launch, facts = _proxy_launch(backend)
    launch = with_keys(launch, {"INFERFLEET_PROXY_KEY": KEY}, facts)
    fresh = [a.kind for a in service_actions(launch, _state(), [], "r" * 40)]
    assert "marker" not in fresh and "gate" not in fresh
    if backend == "process":
        assert fresh == ["wait-port", "install", "start"]
    else:
        assert fresh == [
            "wait-port", "install", "install", "install", "daemon-reload", "enable", "restart",
            "health",
        ]  # fmt: skip
    running = _state(
        pid=42,
        process_spec=launch.spec,
        healthy=True,
        state="healthy",
        files={f.path: f.sha256 for f in launch.files},
        units={"system:inferfleet-proxy.service": "active/running"},
    )
    kept = [a.kind for a in service_actions(launch, running, [], "r" * 40)]
    assert kept == ["verify"]
    # A changed key: the process spec, or the unit's keys-digest file, differs: restarted.
    other = with_keys(replace(launch, keys={}), {"INFERFLEET_PROXY_KEY": "x" * 32}, facts)
    changed = [a.kind for a in service_actions(other, running, [], "r" * 40)]
    assert "verify" not in changed and ("start" in changed or "restart" in changed)
