"""Status while a server that listens only when ready is starting (vLLM, L-34).

vLLM refuses connections for its whole load (a minute or more); during that
time its record has no ``healthy_after_s`` yet (the health gate still runs),
so the service is "loading" (starting), not "unhealthy". Once the gate has
passed, a process that stops answering is unhealthy again. A real process on
a real port (tests/fixtures/servers/health_server.py --listen-after).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from helpers import server_script

from inferfleet.backends.process import ProcessBackend
from inferfleet.backends.records import ServiceRecord
from inferfleet.deploy.facts import gather, host_facts
from inferfleet.deploy.state import LOADING, UNHEALTHY, decide

pytestmark = pytest.mark.slow


def test_refusing_while_its_gate_runs_is_starting_then_unhealthy(tmp_path: Path, port: int) -> None:
    state_dir = tmp_path / "state"
    backend = ProcessBackend(state_dir)
    argv = [*server_script("health_server.py"), str(port), "--listen-after", "600"]
    template = ServiceRecord(
        service="vl", host="local", pid=0, create_time=0.0, argv=argv, bind="127.0.0.1",
        port=port, log="", started_at=0.0, spec_hash="h",
    )  # fmt: skip
    record, proc = backend.start(template, env={})
    try:
        starting = decide(gather("vl", host_facts(), state_dir, None))
        assert (starting.state, starting.pid) == (LOADING, proc.pid)
        assert "not listening yet" in starting.detail
        # As start_gated records a passed gate: refusing now is a failure.
        backend.records.write(replace(record, healthy_after_s=61.2))
        after = decide(gather("vl", host_facts(), state_dir, None))
        assert after.state == UNHEALTHY and "does not answer" in after.detail
    finally:
        backend.stop("vl")
