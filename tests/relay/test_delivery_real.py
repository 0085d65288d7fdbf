"""Alert delivery end to end: Prometheus -> Alertmanager -> ``inferfleet relay`` -> a command.

Every piece is real: Debian's Prometheus with the rules ``render`` writes
(intervals shortened in the test's copy, see tests/monitoring/prom.py),
Debian's Alertmanager with the configuration ``relay config`` renders, and
the relay started as its own process through its CLI. The fleet's service
is declared on a port where nothing listens, so its scrape fails from the
first second and ``InferfleetEndpointDown`` fires without waiting for a
model to load (the real server stopping is covered in
tests/monitoring/test_prometheus_real.py).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from helpers import free_port, require
from helpers.prometheus import alerts, quick_copy, rendered, running
from helpers.real_server import fleet_data, wait_for, write_fleet

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io import process
from inferfleet.relay import alertmanager

pytestmark = [pytest.mark.slow]

HERE = Path(__file__).resolve().parent
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
AMTOOL = "/usr/bin/amtool"
RELAY = "from inferfleet.cli.relay_cmd import app; app(prog_name='inferfleet relay')"


def ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


@contextlib.contextmanager
def spawned(argv: list[str], log: Path) -> Iterator[psutil.Process]:
    proc = process.spawn_detached(argv, log_path=log)
    try:
        yield proc
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(proc, grace=10.0)


def read_lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_fired_alert_reaches_the_users_command(tmp_path: Path) -> None:
    require(ALERTMANAGER, "prometheus-alertmanager")
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port())))
    relay_port, am_port, prom_port = free_port(), free_port(), free_port()
    received = tmp_path / "received.jsonl"

    am_config = tmp_path / "alertmanager.yml"
    am_config.write_text(
        alertmanager.render(
            f"http://127.0.0.1:{relay_port}/alerts",
            group_wait="1s",
            group_interval="1s",
            repeat_interval="1h",
        )
    )
    checked = subprocess.run(
        [AMTOOL, "check-config", str(am_config)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    relay_argv = [sys.executable, "-c", RELAY, "serve", "--port", str(relay_port), "--"]
    relay_argv += [sys.executable, str(HERE / "record_alert.py"), str(received), "--from-test"]
    am_argv = [
        ALERTMANAGER,
        f"--config.file={am_config}",
        f"--storage.path={tmp_path / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",  # no gossip port on 0.0.0.0: a single, local Alertmanager
        "--log.level=warn",
    ]
    config, rules = rendered(loaded)
    sending = alertmanager.prometheus_alerting([f"127.0.0.1:{am_port}"])
    quick, quick_rules = quick_copy(config, rules, extra={"alerting": sending})

    with (
        spawned(relay_argv, tmp_path / "relay.log"),
        spawned(am_argv, tmp_path / "alertmanager.log"),
    ):
        wait_for("the relay", lambda: ready(f"http://127.0.0.1:{relay_port}/healthz"), 60)
        wait_for("alertmanager", lambda: ready(f"http://127.0.0.1:{am_port}/-/ready"), 60)
        with running(tmp_path / "prometheus", quick, quick_rules, prom_port) as prom:
            wait_for(
                "InferfleetEndpointDown to fire in Prometheus",
                lambda: alerts(prom, "InferfleetEndpointDown", "firing"),
                timeout=90,
            )
            lines = wait_for("the command to run", lambda: read_lines(received), timeout=90)

    first = lines[0]
    assert first["argv"] == ["--from-test"]
    env = first["env"]
    assert isinstance(env, dict)
    assert env["INFERFLEET_ALERT_NAME"] == "InferfleetEndpointDown"
    assert env["INFERFLEET_ALERT_STATUS"] == "firing"
    assert env["INFERFLEET_ALERT_SERVICE"] == "gemma"
    assert env["INFERFLEET_ALERT_HOST"] == "local"
    assert env["INFERFLEET_ALERT_SEVERITY"] == "critical"
    assert env["INFERFLEET_ALERT_RECEIVER"] == alertmanager.RECEIVER
    assert env["INFERFLEET_ALERT_TEXT"].startswith("[FIRING] InferfleetEndpointDown gemma@local: ")
    assert json.loads(env["INFERFLEET_ALERT_JSON"])["labels"]["job"] == "inferfleet-gemma"
    assert "relay: [FIRING] InferfleetEndpointDown" in (tmp_path / "relay.log").read_text()
