"""bench never measures this machine's loopback for a service on another host's loopback."""

from __future__ import annotations

from pathlib import Path

from helpers import free_port
from helpers.real_server import fleet_data, write_fleet


def test_a_service_only_its_host_reaches_is_refused_with_the_way_to_bench_it(
    cli, tmp_path: Path
) -> None:
    data = fleet_data(free_port())
    devices = data["hosts"]["local"]["devices"]
    data["hosts"]["far"] = {"address": "10.0.0.5", "devices": devices}
    data["services"]["far-gemma"] = {**data["services"]["gemma"], "host": "far"}
    fleet = write_fleet(tmp_path / "fleet.yaml", data)
    out = tmp_path / "results"
    result = cli("bench", "far-gemma", "--file", str(fleet), "--out", str(out))
    assert result.code == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "listens on 127.0.0.1:" in said and "of host far" in said
    assert "inferfleet bench far-gemma" in said and "Traceback" not in said
    assert not out.exists()  # nothing measured, nothing written
