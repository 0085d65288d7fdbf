"""The collector without a model server: what it says when things are missing or broken."""

from __future__ import annotations

from pathlib import Path

from helpers import free_port
from helpers.real_server import SERVICE, fleet_data, write_fleet

from inferfleet import paths
from inferfleet.backends.process import ProcessBackend
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.status import Options, collect


def test_a_corrupt_record_makes_its_row_unknown_not_the_table_fail(tmp_path: Path) -> None:
    data = fleet_data(free_port())
    data["services"]["other"] = {**data["services"][SERVICE], "port": free_port()}
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", data))
    record = ProcessBackend(paths.state_dir()).records.path(SERVICE)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("{half a record")
    status = collect(loaded)
    rows = {r.service: r for r in status.services}
    assert rows[SERVICE].state == "unknown"
    assert "service record" in rows[SERVICE].detail and "is damaged" in rows[SERVICE].detail
    assert rows["other"].state == "stopped"
    # A declared service that does not run is a problem too: status exits 1 for it.
    assert status.problems() == [rows[SERVICE], rows["other"]]
    assert not status.ok and status.document()["ok"] is False
    assert record.read_text() == "{half a record"  # read, never rewritten


def test_without_ssh_a_remote_loopback_service_is_unknown_never_read_here(tmp_path: Path) -> None:
    data = fleet_data(free_port())
    data["hosts"]["atlas"] = {"address": "atlas.example"}
    data["services"]["grafana"] = {
        "host": "atlas",
        "kind": "container",
        "image": "docker.io/grafana/grafana@sha256:" + "0" * 64,
        "port": free_port(),
    }
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", data))
    status = collect(loaded, options=Options(ssh=False, timeout=1.0))
    hosts = {h.host: h for h in status.hosts}
    assert hosts["atlas"].reach == "unknown"  # nothing of it was read
    grafana = next(r for r in status.services if r.service == "grafana")
    # Its bind is loopback on atlas: only atlas can tell, and atlas was not asked. This
    # machine's own 127.0.0.1 is never read for it (a stranger there would answer, L-33).
    assert (grafana.state, grafana.kind, grafana.slots, grafana.parallel) == (
        "unknown",
        "container",
        None,
        None,
    )
    assert grafana.detail.startswith("not read on its host: ")
    assert grafana.links == {"health": grafana.url + "/health"}
    assert grafana.revision.state == "untracked"
