"""``facts record --from-log`` from a real llama-server (b11434, CPU) on the real Gemma
3 270M: the log a running host writes, stopped cleanly so it prints its memory
breakdown, recorded and then used by ``budget`` in place of the estimate (L-27)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import running_server

# The real model and server, made once per machine (tests/helpers/real_model.py): never skipped.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("gemma_file", "llama_server_binary")]


def test_a_running_servers_log_is_recorded_and_prices_the_service(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    # --log-jsonl -lv 4: the memory breakdown events and the context lines --from-log reads.
    with running_server(tmp_path / "host", extra_args=["--log-jsonl", "-lv", "4"]) as running:
        pass  # healthy: loaded, its buffers allocated; stopping it prints the breakdown
    recorded = cli("facts", "record", str(running.fleet), "--from-log", f"gemma={running.log}")
    assert recorded.code == 0, recorded.stdout + recorded.stderr
    # Without the memory report a log records nothing: exit 2, the fix named.
    plain = tmp_path / "plain.log"
    plain.write_text("main: server is listening on http://127.0.0.1:8080\n")
    refused = cli("facts", "record", str(running.fleet), "--from-log", f"gemma={plain}")
    assert refused.code == 2 and "--log-jsonl" in refused.stderr
    where = running.fleet.parent / "facts" / "services" / "gemma.json"
    record = json.loads(where.read_text())
    (boot,) = record["boots"]
    assert boot["breakdowns"] and boot["caches"]  # what the server itself reported
    doc = json.loads(cli("budget", "gemma", "-f", str(running.fleet), "--json").stdout)
    (service,) = doc["services"]
    assert any(d["measured"] for d in service["devices"]), service["devices"]
    said = " ".join(cli("budget", "gemma", "-f", str(running.fleet)).stdout.split())
    assert "priced by 1 measured boot(s) from facts/services/gemma.json" in said
