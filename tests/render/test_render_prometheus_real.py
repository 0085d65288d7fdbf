"""Monitoring proven for real: Prometheus scrapes the real llama-server with the rendered config.

The config and rules come from ``render`` for a fleet whose service runs on
a free port here; the test's copy only shortens intervals and ``for`` (see
``prom.quick_copy``). It asserts that the server's ``llamacpp:`` series
arrive with the fleet's labels, that the recording rules evaluate, and that
``InferfleetEndpointDown`` fires once the server is stopped (L-56: an
endpoint that stops answering /metrics must not drop out silently).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import free_port
from helpers.prometheus import alerts, api, query, quick_copy, rendered, running
from helpers.real_server import SERVICE, fleet_data, served, wait_for, write_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_prometheus_scrapes_the_real_server_evaluates_rules_and_fires_when_it_stops(
    tmp_path: Path,
) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port()))
    with served(fleet, tmp_path / "state") as gemma:
        config, rules = rendered(gemma.loaded)
        # What is tested is what render writes: one job for the service, at its address.
        [job] = yaml.safe_load(config)["scrape_configs"]
        assert job["static_configs"][0]["targets"] == [f"127.0.0.1:{gemma.port}"]
        assert yaml.safe_load(config)["rule_files"] == ["rules/inferfleet.rules.yml"]
        quick, quick_rules = quick_copy(config, rules)

        with running(tmp_path / "prometheus", quick, quick_rules, free_port()) as prom:
            series = wait_for(
                "llamacpp: series from the server",
                lambda: query(prom, f'llamacpp:requests_deferred{{service="{SERVICE}"}}'),
                timeout=90,
            )
            labels = series[0]["metric"]
            assert labels["job"] == f"inferfleet-{SERVICE}"
            assert (labels["host"], labels["runtime"], labels["model"]) == (
                "local",
                "llama.cpp",
                "gemma3-270m",
            )
            assert series[0]["value"][1] == "0"
            names = {r["metric"]["__name__"] for r in query(prom, '{__name__=~"llamacpp:.+"}')}
            assert {"llamacpp:requests_processing", "llamacpp:tokens_predicted_total"} <= names

            # Recording rules: the fleet's capacity and the runtime's running requests.
            running_now = wait_for(
                "inferfleet:requests_running",
                lambda: query(prom, f'inferfleet:requests_running{{service="{SERVICE}"}}'),
                timeout=60,
            )
            assert running_now[0]["value"][1] == "0"
            slots = wait_for(
                "inferfleet:slots", lambda: query(prom, "inferfleet:slots"), timeout=60
            )
            assert slots[0]["metric"]["service"] == SERVICE and slots[0]["value"][1] == "2"
            groups = api(prom, "/api/v1/rules")["groups"]
            assert {g["name"] for g in groups} == {"inferfleet-recording", "inferfleet-alerts"}
            assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups
            assert not alerts(prom, "InferfleetEndpointDown", "firing")

            gemma.kill()
            firing = wait_for(
                "InferfleetEndpointDown to fire",
                lambda: alerts(prom, "InferfleetEndpointDown", "firing"),
                timeout=90,
            )
            assert firing[0]["labels"]["service"] == SERVICE
            assert firing[0]["labels"]["severity"] == "critical"
            assert "not answering /metrics" in firing[0]["annotations"]["summary"]
