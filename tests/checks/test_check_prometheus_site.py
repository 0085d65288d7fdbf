"""L-57 for the fleet's Prometheus (``monitoring.prometheus``): what it cannot reach is refused.

In the base fleet, host ``gpu`` runs ``chat`` (llama.cpp, 127.0.0.1:8080) and
``serve`` (vLLM in a bridged container, published on 127.0.0.1:8000), both
with metrics. A Prometheus in a bridged container on ``gpu`` reaches its host
only at ``host.containers.internal``: inside the container 127.0.0.1 is the
container's own, so a loopback bind can never be scraped from there. A
Prometheus on another host cannot reach a loopback bind either (L-58's
``front-cannot-reach``, which now judges Prometheus' routes too).

Mutations killed (each applied and seen failing):
- the ``container-cannot-reach-loopback`` rule removed (the incident passes
  ``check``; ``test_every_rule_has_a_case`` loses the rule too);
- its ``bridged`` condition dropped (Prometheus on the host's network would be
  refused: ``test_on_the_hosts_network_loopback_is_reached``);
- Prometheus' routes left out of ``_fronted`` (neither rule fires).
"""

from __future__ import annotations

from pathlib import Path

from check_helpers import check

from inferfleet.checks.engine import Finding, Report

CONTAINER_REACH_RULES = {"container-cannot-reach-loopback"}
S = "services"
LAN = {"level": "lan", "reason": "Prometheus in a container on gpu scrapes it"}
IN_CONTAINER = {"monitoring": {"prometheus": {"host": "gpu", "network": "container"}}}


def hits(report: Report, rule: str) -> dict[str | None, Finding]:
    return {f.service: f for f in report.findings if f.rule == rule}


def test_L57_prometheus_in_a_container_cannot_scrape_a_loopback_bind(tmp_path: Path) -> None:
    found = hits(check(tmp_path, IN_CONTAINER), "container-cannot-reach-loopback")
    assert set(found) == {"chat", "serve"}
    chat = found["chat"]
    assert (chat.severity, chat.lesson, chat.field) == (
        "error",
        "L-57",
        "monitoring.prometheus.host",
    )
    assert chat.message == (
        "Prometheus runs in a bridged container on host 'gpu' and scrapes service 'chat', "
        "which binds 127.0.0.1: inside the container that address is the container's own, "
        "and the host is reached only at host.containers.internal"
    )
    assert "bind service 'chat' to 0.0.0.0 with exposure: {level: lan" in chat.hint
    assert "host.containers.internal:8080" in chat.hint and "network: host" in chat.hint
    written = (tmp_path / "fleet.yaml").read_text().splitlines()
    assert chat.line is not None and "host: gpu" in written[chat.line - 1]


def test_L57_a_wildcard_bind_is_reached_at_the_gateway_name(tmp_path: Path) -> None:
    patch = {
        **IN_CONTAINER,
        f"{S}.chat.bind": "0.0.0.0",
        f"{S}.chat.exposure": LAN,
        f"{S}.serve.bind": "0.0.0.0",
        f"{S}.serve.exposure": LAN,
        # beyond loopback, each requires its key (L-58's key-beyond-loopback)
        f"{S}.chat.secrets_env": "/etc/inferfleet/chat.env",
        f"{S}.serve.secrets_env": "/etc/inferfleet/serve.env",
    }
    report = check(tmp_path, patch)
    assert report.findings == []


def test_on_the_hosts_network_loopback_is_reached(tmp_path: Path) -> None:
    report = check(tmp_path, {"monitoring": {"prometheus": {"host": "gpu", "network": "host"}}})
    assert report.findings == []


def test_prometheus_on_another_host_cannot_scrape_a_loopback_bind(tmp_path: Path) -> None:
    report = check(tmp_path, {"monitoring": {"prometheus": {"host": "apu"}}})
    found = hits(report, "front-cannot-reach")
    assert set(found) == {"chat", "serve"}
    assert found["chat"].message == (
        "Prometheus on host 'apu' scrapes service 'chat' on host 'gpu', which binds 127.0.0.1: "
        "only its own host reaches it"
    )
    assert found["chat"].hint.startswith("run Prometheus on 'gpu', or bind service 'chat'")
    assert hits(report, "container-cannot-reach-loopback") == {}
