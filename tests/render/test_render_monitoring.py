"""Prometheus config and rules through the real promtool; the Grafana dashboard model.

``promtool test rules`` runs the rendered alert and recording rules against
series shaped like each runtime's real ``/metrics`` (names from the
adapters: ``llamacpp:*`` from llama.cpp b11434's server-task.cpp, ``vllm:*``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from render_helpers import load, render, run

from inferfleet.cli.render_files import write_bundle
from inferfleet.render import prometheus
from inferfleet.render.grafana import dashboard


def write(fleet: str, tmp_path: Path) -> Path:
    out = tmp_path / fleet
    write_bundle(render(fleet), out)
    return out / "monitoring"


@pytest.mark.parametrize("fleet", ["local", "homelab", "runtimes"])
def test_promtool_accepts_config_and_rules(fleet: str, promtool: str, tmp_path: Path) -> None:
    monitoring = write(fleet, tmp_path)
    # A service beyond loopback is scraped with its key (L-58): promtool wants each
    # credentials file to exist, as Prometheus does.
    for job in yaml.safe_load((monitoring / "prometheus.yml").read_text())["scrape_configs"]:
        if "authorization" in job:
            key = monitoring / job["authorization"]["credentials_file"]
            key.parent.mkdir(exist_ok=True)
            key.write_text("k" * 32)
            key.chmod(0o600)
    config = run([promtool, "check", "config", str(monitoring / "prometheus.yml")])
    assert config.returncode == 0, config.stdout + config.stderr
    assert "SUCCESS: 1 rule files found" in config.stdout
    rules = run([promtool, "check", "rules", str(monitoring / "rules" / prometheus.RULES_FILE)])
    assert rules.returncode == 0, rules.stdout + rules.stderr


def test_promtool_harness_rejects_a_broken_rule(promtool: str, tmp_path: Path) -> None:
    path = write("homelab", tmp_path) / "rules" / prometheus.RULES_FILE
    path.write_text(path.read_text().replace("== 0", "== == 0"))
    assert run([promtool, "check", "rules", str(path)]).returncode == 1


def test_every_metrics_endpoint_has_a_scrape_job_and_no_other() -> None:
    """L-56: a scrape job exists exactly where metrics are on."""
    for fleet in ("homelab", "runtimes"):
        loaded = load(fleet)
        jobs = {job["job_name"] for job in prometheus.scrape_jobs(loaded.fleet)}
        expected = {
            f"inferfleet-{name}" for name, svc in loaded.fleet.services.items() if svc.metrics_on
        }
        assert jobs == expected
        llm = {n for n, s in loaded.fleet.services.items() if s.kind == "llm"}
        assert {f"inferfleet-{n}" for n in llm} <= jobs


def test_sglang_gets_its_metrics_flag_and_job() -> None:
    (argv,) = [a for a in render("runtimes") if a.path == "hosts/lab/sg.argv.json"]
    assert "--enable-metrics" in json.loads(argv.content)["argv"]


LABELS = {
    "coder": 'job="inferfleet-coder",instance="192.168.1.22:8080",service="coder",host="forge",'
    'runtime="llama.cpp",model="qwen3-coder-30b"',
    "chat": 'job="inferfleet-chat",instance="127.0.0.1:8000",service="chat",host="atlas",'
    'runtime="vllm",model="qwen3-30b-a3b",model_name="qwen3-30b-a3b"',
}


def _labels(service: str) -> dict[str, str]:
    pairs = [p.split("=", 1) for p in LABELS[service].split(",")]
    return {k: v.strip('"') for k, v in pairs}


def rule_tests(rules_file: Path) -> dict[str, Any]:
    coder, chat = LABELS["coder"], LABELS["chat"]
    no_labels = {"service": "vision", "host": "nova", "severity": "warning"}
    return {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"up{{{coder}}}", "values": "1 1 0x20"},
                    {"series": f"up{{{chat}}}", "values": "1x22"},
                    # coder: three slots busy, two requests deferred, for 20 minutes.
                    {"series": f"llamacpp:requests_processing{{{coder}}}", "values": "3x22"},
                    {"series": f"llamacpp:requests_deferred{{{coder}}}", "values": "2x22"},
                    {"series": f"llamacpp:tokens_predicted_total{{{coder}}}", "values": "0+600x22"},
                    # chat: 8 slots, 2 busy, nothing waiting.
                    {"series": f"vllm:num_requests_running{{{chat}}}", "values": "2x22"},
                    {"series": f"vllm:num_requests_waiting{{{chat}}}", "values": "0x22"},
                    {"series": f"vllm:generation_tokens_total{{{chat}}}", "values": "0+1200x22"},
                ],
                "alert_rule_test": [
                    {"eval_time": "3m", "alertname": "InferfleetEndpointDown", "exp_alerts": []},
                    {
                        "eval_time": "5m",
                        "alertname": "InferfleetEndpointDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {**_labels("coder"), "severity": "critical"},
                                "exp_annotations": {
                                    "summary": "coder on forge is not answering /metrics",
                                    "description": "The scrape of 192.168.1.22:8080 fails: the "
                                    "server is down, or started without its metrics flag "
                                    "(501, L-56).",
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "7m",
                        "alertname": "InferfleetRequestsDeferred",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "service": "coder",
                                    "host": "forge",
                                    "runtime": "llama.cpp",
                                    "severity": "warning",
                                },
                                "exp_annotations": {
                                    "summary": "coder queues requests: every slot is busy",
                                    "description": "2 requests waiting for 5 minutes; add slots "
                                    "or another endpoint (the per-slot window is the client "
                                    "contract, L-25).",
                                },
                            }
                        ],
                    },
                    {"eval_time": "8m", "alertname": "InferfleetSlotsSaturated", "exp_alerts": []},
                    {
                        "eval_time": "12m",
                        "alertname": "InferfleetSlotsSaturated",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "service": "coder",
                                    "host": "forge",
                                    "runtime": "llama.cpp",
                                    "severity": "warning",
                                },
                                "exp_annotations": {
                                    "summary": "coder has had all its slots busy for 10 minutes",
                                    "description": "Requests beyond the slot count are deferred.",
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "12m",
                        "alertname": "InferfleetNoSamples",
                        "exp_alerts": [
                            {
                                "exp_labels": no_labels,
                                "exp_annotations": {
                                    "summary": "no runtime samples from vision",
                                    "description": "The fleet has this service but Prometheus "
                                    "gets none of its series: no scrape job, or metrics are off "
                                    "(L-56).",
                                },
                            }
                        ],
                    },
                ],
                "promql_expr_test": [
                    {
                        "expr": "inferfleet:slots",
                        "eval_time": "1m",
                        "exp_samples": [
                            {"labels": 'inferfleet:slots{service="chat",host="atlas"}', "value": 8},
                            {
                                "labels": 'inferfleet:slots{service="vision",host="nova"}',
                                "value": 2,
                            },
                            {
                                "labels": 'inferfleet:slots{service="coder",host="forge"}',
                                "value": 3,
                            },
                        ],
                    },
                    {
                        "expr": 'inferfleet:generation_tokens:rate5m{service="chat"}',
                        "eval_time": "10m",
                        "exp_samples": [
                            {
                                "labels": 'inferfleet:generation_tokens:rate5m{service="chat",'
                                'host="atlas",runtime="vllm"}',
                                "value": 20,
                            }
                        ],
                    },
                    {
                        "expr": "inferfleet:requests_running",
                        "eval_time": "10m",
                        "exp_samples": [
                            {
                                "labels": 'inferfleet:requests_running{service="coder",'
                                'host="forge",runtime="llama.cpp"}',
                                "value": 3,
                            },
                            {
                                "labels": 'inferfleet:requests_running{service="chat",'
                                'host="atlas",runtime="vllm"}',
                                "value": 2,
                            },
                        ],
                    },
                ],
            }
        ],
    }


def test_alert_and_recording_rules_pass_promtool_test(promtool: str, tmp_path: Path) -> None:
    rules_file = write("homelab", tmp_path) / "rules" / prometheus.RULES_FILE
    spec = rule_tests(rules_file)
    tests = tmp_path / "rules.test.yml"
    tests.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run([promtool, "test", "rules", str(tests)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_test_fails_when_an_alert_does_not_fire(promtool: str, tmp_path: Path) -> None:
    """The rule tests can fail: healthy input does not raise EndpointDown."""
    rules_file = write("homelab", tmp_path) / "rules" / prometheus.RULES_FILE
    spec = rule_tests(rules_file)
    spec["tests"][0]["input_series"][0]["values"] = "1x22"  # coder stays up
    tests = tmp_path / "rules.test.yml"
    tests.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run([promtool, "test", "rules", str(tests)])
    assert result.returncode == 1 and "InferfleetEndpointDown" in result.stdout + result.stderr


# ---------------------------------------------------------------- Grafana

# The parts of Grafana's dashboard model (schemaVersion 39) the UI needs to
# import a dashboard: ids unique, every panel placed on the 24-column grid,
# every query panel with a Prometheus datasource and refIds.
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "time": {"type": "object", "required": ["from", "to"]},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {
                "list": {
                    "type": "array",
                    "items": {"type": "object", "required": ["name", "type"]},
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos"],
                "properties": {
                    "id": {"type": "integer", "minimum": 1},
                    "type": {"enum": ["stat", "timeseries", "text", "table", "gauge"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                            "y": {"type": "integer", "minimum": 0},
                            "h": {"type": "integer", "minimum": 1},
                        },
                    },
                    "targets": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["expr", "refId", "datasource"],
                            "properties": {
                                "datasource": {
                                    "type": "object",
                                    "required": ["type", "uid"],
                                    "properties": {"type": {"const": "prometheus"}},
                                }
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize("fleet", ["local", "homelab", "runtimes"])
def test_grafana_dashboard_is_a_valid_model(fleet: str) -> None:
    board = dashboard(load(fleet).fleet)
    jsonschema.validate(board, DASHBOARD_SCHEMA)
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs))
    variables = {v["name"] for v in board["templating"]["list"]}
    used = json.dumps(board["panels"])
    assert "$service" in used and "${datasource}" in used and variables == {"datasource", "service"}


def test_dashboard_queries_only_series_the_rules_record() -> None:
    board = dashboard(load("homelab").fleet)
    rules = prometheus.rules_file(load("homelab").fleet)
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            name = target["expr"].split("{", 1)[0]
            assert name == "up" or f"record: {name}\n" in rules


def test_dashboard_shows_the_client_contract() -> None:
    board = dashboard(load("homelab").fleet)
    (text,) = [p for p in board["panels"] if p["type"] == "text"]
    assert (
        "| coder | forge | llama.cpp | qwen3-coder-30b | 32768 | 3 |" in text["options"]["content"]
    )
