"""L-57: a container's hand-written config that reaches a host-network service at the host's
address is flagged, in each kind of config the lesson's incident family covers.

The incident was a Caddyfile upstream; a Prometheus target and a gateway
(LiteLLM) backend in a bridged container fail the same way: only published
ports are forwarded inside a container network, so ``10.0.0.5:8080`` (the
host's own address, a llama-server on the host network) is unreachable, and
``host.containers.internal:8080`` is the fix. In the base fleet, host ``gpu``
is 10.0.0.5, ``chat`` listens on its network at 8080, and ``serve`` is a
bridged container publishing 8000 (reachable at the host's address: no finding).

Mutations killed: dropping the scan of settings templates from the
``container-host-lan-address`` rule (only env maps were judged before);
leaving the gateway's and the proxy's ports out of the host-network ports
(a container calling the gateway at the host's address, the common Open WebUI
setup, was not judged).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from check_helpers import check

from inferfleet.checks.engine import Finding, Report

S = "services"

CONFIGS = {
    "caddy": ("settings/Caddyfile", "ai.lan {{\n\treverse_proxy {target}\n}}\n", 2),
    "prometheus": (
        "settings/prometheus.yml",
        "scrape_configs:\n  - job_name: chat\n    static_configs:\n      - targets: ['{target}']\n",
        4,
    ),
    "gateway": (
        "settings/litellm.yaml",
        "model_list:\n  - model_name: chat\n    litellm_params:\n"
        "      model: openai/chat\n      api_base: http://{target}/v1\n",
        5,
    ),
}


def with_config(tmp_path: Path, kind: str, target: str) -> Report:
    template, text, _ = CONFIGS[kind]
    settings = [{"template": template, "dest": "~/.config/web/app.conf", "allow": []}]
    return check(tmp_path, {f"{S}.web.settings": settings}, {template: text.format(target=target)})


def hits(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.rule == "container-host-lan-address"]


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_L57_a_hand_written_lan_address_is_flagged(tmp_path: Path, kind: str) -> None:
    template, _, line = CONFIGS[kind]
    (hit,) = hits(with_config(tmp_path, kind, "10.0.0.5:8080"))
    assert hit.field == "services.web.settings[0].template"
    assert hit.severity == "warning" and hit.lesson == "L-57"
    assert (
        f"reaches 10.0.0.5:8080 from inside its container ({template}, line {line})" in hit.message
    )
    assert "host.containers.internal:8080" in hit.hint


@pytest.mark.parametrize("kind", sorted(CONFIGS))
@pytest.mark.parametrize(
    "target",
    [
        "host.containers.internal:8080",  # the fix
        "10.0.0.5:8000",  # a published container port: DNATed, reachable
        "10.0.0.9:8080",  # another host's address
    ],
)
def test_L57_the_gateway_name_and_published_ports_pass(
    tmp_path: Path, kind: str, target: str
) -> None:
    assert hits(with_config(tmp_path, kind, target)) == []


def test_L57_a_host_network_container_may_use_the_host_address(tmp_path: Path) -> None:
    template, text, _ = CONFIGS["caddy"]
    settings = [{"template": template, "dest": "~/.config/web/app.conf", "allow": []}]
    report = check(
        tmp_path,
        {f"{S}.web.settings": settings, f"{S}.web.container.network": "host"},
        {template: text.format(target="10.0.0.5:8080")},
    )
    assert hits(report) == []


GATEWAY = {"host": "gpu", "keys_env": "/etc/inferfleet/secrets/gateway.env", "port": 4000}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_L57_the_gateway_on_the_host_network_is_judged_too(tmp_path: Path, kind: str) -> None:
    """The gateway listens on its host's network (a process, or its Quadlet container with
    Network=host): a bridged container on that host reaches it at the gateway name only."""
    template, text, line = CONFIGS[kind]
    settings = [{"template": template, "dest": "~/.config/web/app.conf", "allow": []}]
    patch = {f"{S}.web.settings": settings, "gateway": GATEWAY}
    found = hits(check(tmp_path / "lan", patch, {template: text.format(target="10.0.0.5:4000")}))
    (hit,) = found
    assert f"reaches 10.0.0.5:4000 from inside its container ({template}, line {line})" in (
        hit.message
    )
    assert "host.containers.internal:4000" in hit.hint
    fixed = {template: text.format(target="host.containers.internal:4000")}
    assert hits(check(tmp_path / "fixed", patch, fixed)) == []


def test_L57_a_container_env_naming_the_gateway_at_loopback_is_flagged(tmp_path: Path) -> None:
    env = {"OPENAI_API_BASE_URL": "http://127.0.0.1:4000/v1"}
    (hit,) = hits(check(tmp_path, {f"{S}.web.container.env": env, "gateway": GATEWAY}))
    assert hit.field == "services.web.container.env.OPENAI_API_BASE_URL"
    assert "host.containers.internal:4000" in hit.hint
