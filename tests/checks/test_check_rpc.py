"""The rules about models split over RPC workers: the worker's bind, the split's fit."""

from __future__ import annotations

from pathlib import Path

from helpers.rpc_fleet import SERVICE, rpc_data, write

from inferfleet.artifacts.sources import LocalSources
from inferfleet.checks.engine import run_checks
from inferfleet.fleetfile.loader import load_fleet

RPC_RULES = {"rpc-worker-bind", "rpc-split-fit"}


def _findings(tmp_path: Path, rule: str, **changes: str) -> list[str]:
    loaded = load_fleet(write(tmp_path / "fleet.yaml", rpc_data(**changes)))
    report = run_checks(loaded, sources=LocalSources(loaded))
    return [f.message for f in report.findings if f.rule == rule]


def test_a_split_that_does_not_fit_a_worker_is_an_error(tmp_path: Path) -> None:
    # the real model's header (its package is installed with the test extras)
    assert _findings(tmp_path, "rpc-split-fit") == []
    [message] = _findings(tmp_path, "rpc-split-fit", worker_memory="64MiB", host_memory="1GiB")
    assert message.startswith(f"service {SERVICE!r} is split over RPC workers")
    assert "worker h2:cpu0 (RPC0) holds" in message


def test_a_public_worker_bind_is_an_error(tmp_path: Path) -> None:
    assert _findings(tmp_path, "rpc-worker-bind") == []
    [message] = _findings(tmp_path, "rpc-worker-bind", bind="8.8.8.8")
    assert "a public address" in message and "no authentication" in message
