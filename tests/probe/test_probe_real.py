"""The contract probe against the real llama-server on the real 270M base model.

The model cannot call tools, has no vision projector and does not reason:
where the fleet file declares those, the probe must fail with the server's
own answer as evidence; where nothing is declared, it must skip. Every
other check must pass, with evidence a reader could replay.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import Running, fleet_data, running_server, write_fleet

from inferfleet.client.target import from_service
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io import http
from inferfleet.probe import checks_api, checks_features, checks_slots
from inferfleet.probe.client_config import compare
from inferfleet.probe.evidence import Exchange
from inferfleet.probe.session import Session

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXPECTED = {
    "health": "pass",
    "alias": "pass",
    "completions": "pass",
    "completions-stream": "pass",
    "chat": "pass",
    "chat-stream": "pass",
    "timings": "pass",
    "draft": "skip",  # no drafter declared
    "context": "pass",
    "overflow": "pass",
    "slots": "pass",
    "tools": "skip",  # not declared by the example
    "reasoning": "pass",  # declares none, the server writes none
    "efforts": "skip",  # no reasoning declared
    "vision": "skip",  # no image input declared
    "metrics": "pass",
}


def probe_json(cli: Callable[..., Any], *args: str) -> tuple[int, dict[str, Any]]:
    result = cli("probe", *args, "--json")
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.probe/v1"
    return result.code, doc


def session_for(fleet: Path, client: Any) -> Session:
    target = from_service(load_fleet(fleet), "gemma")
    assert target.model is not None
    return Session(target=target, exchange=Exchange(client), model=target.model)


def test_probe_of_the_example_service_passes_and_skips_honestly(
    cli: Callable[..., Any], server: Running
) -> None:
    code, doc = probe_json(cli, "gemma", "--file", str(server.fleet))
    statuses = {c["id"]: c["status"] for c in doc["checks"]}
    assert statuses == EXPECTED, json.dumps(doc["checks"], indent=1)
    assert code == 0 and doc["ok"] is True
    checks = {c["id"]: c for c in doc["checks"]}
    # L-25: one token over the 4096-token slot is refused by the slot, not the 8192 pool.
    (overflow,) = checks["overflow"]["evidence"]
    assert overflow["status"] == 400 and "exceed_context_size_error" in overflow["answer"]
    assert '"n_ctx":4096' in overflow["answer"] and "x 4097 token ids" in overflow["body"]
    assert "stream 3 got its first token only after one finished" in checks["slots"]["summary"]
    assert checks["timings"]["summary"].startswith("timings in 4 answers")
    found = doc["findings"]
    assert (found["runtime"], found["n_ctx_slot"], found["total_slots"]) == ("llama.cpp", 4096, 2)
    assert found["reasoning_field"] is None and found["metrics_ok"] is True


def test_declared_features_the_base_model_lacks_fail_with_evidence(
    server: Running, tmp_path: Path
) -> None:
    """L-18, L-44, L-45: tools, vision and reasoning declared on a model without them."""
    fleet = write_fleet(
        tmp_path / "fleet.yaml",
        fleet_data(
            server.port,
            client={
                "max_tokens": 512,
                "tools": True,
                "input": ["text", "image"],
                "reasoning_field": "reasoning_content",
            },
        ),
    )
    with http.client(timeout=300.0, base_url=server.url) as client:
        s = session_for(fleet, client)
        checks_api.read_props(s)
        tools = checks_features.tools(s)
        vision = checks_features.vision(s)
        reasoning = checks_features.reasoning(s)
        efforts = checks_features.efforts(s)
    assert tools.status == "fail" and "no tool_calls" in tools.summary
    assert '"template_supports_tools":false' in tools.evidence[0].answer
    assert "--jinja" in tools.hint
    assert vision.status == "fail" and vision.summary == "HTTP 500"
    assert "mmproj" in vision.evidence[0].answer and '"vision":false' in vision.evidence[1].answer
    assert reasoning.status == "fail" and "carries no reasoning text" in reasoning.summary
    # The template takes every value without error, and says it never reads them (L-46).
    assert efforts.status == "pass" and "the template ignores reasoning_effort" in efforts.summary
    assert s.findings.tools_ok is False and s.findings.vision_ok is False
    # What a renderer would emit from these declarations disagrees with the probe.
    declared = {"context_window": 4096, "max_tokens": 512, "input": ["text", "image"]}
    keys = {m.key for m in compare(s.findings, {**declared, "tools": True})}
    assert keys == {"input", "tools"}


def test_L25_a_fleet_file_that_promises_the_pool_per_slot_fails(
    server: Running, tmp_path: Path
) -> None:
    """The server runs 2 x 4096; a fleet file claiming 1 x 8192 is caught three ways."""
    fleet = write_fleet(
        tmp_path / "fleet.yaml", fleet_data(server.port, ctx_per_slot=8192, parallel=1)
    )
    with http.client(timeout=300.0, base_url=server.url) as client:
        s = session_for(fleet, client)
        checks_api.models(s)
        checks_api.read_props(s)
        context = checks_slots.context(s)
        overflow = checks_slots.overflow(s)
        slots = checks_slots.concurrency(s)
    assert (
        context.status == "fail" and "4096 tokens, the fleet file promises 8192" in context.summary
    )
    assert overflow.status == "fail" and "at a window of 4096 tokens, not 8192" in overflow.summary
    assert slots.status == "fail" and "2 slots, the fleet file declares 1" in slots.summary


def test_L56_a_server_without_metrics_fails_the_metrics_check(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "nometrics", drop_flags=("--metrics",)) as bare,
        http.client(timeout=60.0, base_url=bare.url) as client,
    ):
        s = session_for(bare.fleet, client)
        result = checks_api.metrics(s)
    assert result.status == "fail" and result.summary.startswith("501")
    assert "--metrics" in result.hint
