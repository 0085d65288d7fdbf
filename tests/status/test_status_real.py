"""The fleet status against the real llama-server started by ``inferfleet up``.

One server for the module (started through ``local.up`` so its record is
where a user's would be). Remote hosts are hosts of the fleet file whose
address is not this machine: their endpoints are read over HTTP as
Prometheus reads them, and ssh is really tried (OpenSSH's client, pointed at
a closed loopback port by an ssh config) and fails the way an unreachable
host does.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import free_port
from helpers.bench_summaries import summary, write
from helpers.git import git
from helpers.real_server import SERVICE, Served, fleet_data, served, wait_for, write_fleet
from rich.console import Console

from inferfleet.deploy import planner
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.markers import Marker, MarkerStore
from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.output import Output
from inferfleet.status import FleetStatus, Options, ServiceRow, collect
from inferfleet.status.view import show

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("gemma")
    fleet = write_fleet(folder / "fleet.yaml", fleet_data(free_port()))
    with served(fleet, folder / "state") as running:
        yield running


@pytest.fixture(autouse=True)
def _server_state(gemma: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    # The module's server keeps its record in its own state dir; read it from there.
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(gemma.state_dir))


def row(status: FleetStatus, name: str = SERVICE) -> ServiceRow:
    return next(r for r in status.services if r.service == name)


def test_the_running_server_reads_healthy_with_its_own_numbers(
    gemma: Served, tmp_path: Path
) -> None:
    results = tmp_path / "bench"
    write(results, "run-1", summary("2026-11-30T12:00:00Z", url=gemma.url, service=None))
    status = collect(gemma.loaded, options=Options(results_dir=results))
    got = row(status)
    assert got.state == "healthy", got.notes
    assert (got.pid, got.pid_source) == (gemma.pid, "record")
    assert got.uptime_s is not None and got.uptime_s > 0
    assert got.runtime_version is not None and "11434" in got.runtime_version
    assert got.model == "gemma3-270m"
    assert (got.ctx_per_slot, got.slots, got.busy_slots) == (4096, 2, 0)
    assert (got.requests_processing, got.requests_deferred) == (0, 0)
    assert got.metrics == "ok"
    assert got.links["slots"] == f"{gemma.url}/slots"
    assert got.revision.state == "untracked"  # a fleet file outside any git repository
    assert got.bench is not None and got.bench.levels[0].decode_tps == 38.5
    assert status.hosts[0].reach == "local" and status.hosts[0].healthy == 1
    doc = json.loads(json.dumps(status.document()))
    assert doc["services"][0]["bench"]["levels"][1]["aggregate_tps"] == 52.4


def test_a_generating_request_shows_as_a_busy_slot(gemma: Served) -> None:
    def generate() -> None:
        with httpx.Client(timeout=300) as client:
            client.post(
                f"{gemma.url}/completion",
                json={"prompt": "Once upon a time", "n_predict": 64, "ignore_eos": True},
            )

    # llama-server answers /slots and /metrics from its main loop, between decode
    # steps: on a loaded machine that takes seconds, so this test waits longer.
    patient = Options(timeout=20.0)
    worker = threading.Thread(target=generate)
    worker.start()
    try:
        busy = wait_for(
            "one busy slot",
            lambda: [
                r
                for r in collect(gemma.loaded, options=patient).services
                if r.busy_slots == 1 and r.slots == 2
            ],
            timeout=120,
            every=0.05,
        )
        assert busy[0].requests_processing == 1
    finally:
        worker.join(300)
    assert row(collect(gemma.loaded, options=patient)).busy_slots == 0


def _fleet_with_remote_hosts(gemma: Served, folder: Path) -> Path:
    data = fleet_data(gemma.port)
    base = data["services"][SERVICE]
    devices = data["hosts"]["local"]["devices"]
    data["hosts"]["far"] = {"address": "far.example", "devices": devices}
    data["hosts"]["gone"] = {"address": "gone.example", "devices": devices}
    # Both bind their host's loopback: far's port here has the module's server behind it
    # (a stranger to far), gone's nothing.
    data["services"]["far-gemma"] = {**base, "host": "far", "port": gemma.port}
    data["services"]["gone-gemma"] = {**base, "host": "gone", "port": free_port()}
    folder.mkdir(parents=True, exist_ok=True)
    path = write_fleet(folder / "fleet.yaml", data)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "fleet")
    return path


@pytest.fixture
def ssh_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh to far.example / gone.example lands on a closed loopback port: refused at once."""
    closed = free_port()
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host far.example gone.example\n  HostName 127.0.0.1\n  Port {closed}\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
    )
    control = tmp_path / "ssh-control"
    control.mkdir(mode=0o700)
    monkeypatch.setenv("INFERFLEET_SSH_CONFIG", str(config))
    monkeypatch.setenv("INFERFLEET_SSH_CONTROL_DIR", str(control))


def test_remote_loopback_services_are_unknown_when_their_hosts_cannot_be_asked(
    gemma: Served, tmp_path: Path, ssh_refused: None
) -> None:
    loaded = load_fleet(_fleet_with_remote_hosts(gemma, tmp_path / "repo"))
    started = time.monotonic()
    status = collect(loaded, options=Options(timeout=2.0))
    assert time.monotonic() - started < 30  # generous: hosts are read at once, not in turn
    assert [r.service for r in status.services] == [SERVICE, "far-gemma", "gone-gemma"]
    hosts = {h.host: h for h in status.hosts}

    # far-gemma binds far's loopback: this machine's 127.0.0.1 on that port is the module's
    # server, a stranger to far (L-33). Only far can tell, and far cannot be asked.
    far = row(status, "far-gemma")
    assert far.state == "unknown" and far.pid is None and far.busy_slots is None
    assert far.detail.startswith("host unreachable: cannot reach the host over ssh"), far.detail
    assert hosts["far"].reach == "unreachable"
    assert "cannot reach the host over ssh" in hosts["far"].detail
    assert far.revision.state == "unknown"  # its markers live on the host

    gone = row(status, "gone-gemma")
    assert gone.state == "unknown" and gone.busy_slots is None
    assert hosts["gone"].reach == "unreachable"
    assert "cannot reach the host over ssh" in hosts["gone"].detail

    mine = row(status)
    # `up` is an apply on this machine: it recorded a marker (revision "untracked": it ran
    # from a copy outside git) whose inputs equal HEAD's, so the service is unchanged.
    assert mine.state == "healthy" and mine.revision.state == "unchanged"
    assert status.head == git(tmp_path / "repo", "rev-parse", "HEAD")
    assert status.problems() == [far, gone] and not status.ok


def test_only_the_named_hosts_and_a_clear_error_for_an_unknown_one(gemma: Served) -> None:
    status = collect(gemma.loaded, ["local"])
    assert [h.host for h in status.hosts] == ["local"]
    with pytest.raises(UsageError, match=r"no host named 'atlas'.*") as caught:
        collect(gemma.loaded, ["local", "atlas"])
    assert caught.value.hint == "hosts: local"


def _marker(repo: Repo, revision: str, port: int) -> Marker:
    at = planner.fleet_at(repo, revision, "fleet.yaml")
    return Marker(
        service=SERVICE,
        host="local",
        revision=revision,
        inputs=at.inputs[SERVICE],
        backend="process",
        bind="127.0.0.1",
        port=port,
        health_path="/health",
        applied_at=time.time(),
        by="test@here",
    )


def test_deployed_revision_against_head(gemma: Served, tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    data: dict[str, Any] = fleet_data(gemma.port)
    path = write_fleet(folder / "fleet.yaml", data)
    (folder / "README.md").write_text("# fleet\n")
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "fleet")
    repo = Repo(folder)
    deployed = repo.head()
    MarkerStore(gemma.state_dir).write(_marker(repo, deployed, gemma.port))

    def revision() -> tuple[str, str | None, str | None, list[str]]:
        rev = row(collect(load_fleet(path))).revision
        return rev.state, rev.deployed, rev.head, rev.reasons

    assert revision() == ("current", deployed, deployed, [])

    # A documentation commit changes nothing this service depends on (L-40).
    (folder / "README.md").write_text("# fleet\n\nmore words\n")
    git(folder, "commit", "-q", "-am", "docs")
    docs = repo.head()
    assert revision() == ("unchanged", deployed, docs, [])

    data["services"][SERVICE]["client"]["max_tokens"] = 256
    write_fleet(path, data)
    git(folder, "commit", "-q", "-am", "smaller answers")
    state, was, head, reasons = revision()
    assert (state, was, head) == ("outdated", deployed, repo.head())
    assert reasons == ["its section of the fleet file changed"]
    MarkerStore(gemma.state_dir).remove(SERVICE)


def test_the_table_shows_every_service_and_host(gemma: Served, tmp_path: Path) -> None:
    status = collect(gemma.loaded)
    out = Output()
    buffer = io.StringIO()
    out.console = Console(file=buffer, width=250, highlight=False)
    show(out, status)
    text = buffer.getvalue()
    assert "gemma" in text and "healthy" in text and "4096x2" in text and "0/2" in text
    assert str(gemma.pid) in text and "untracked" in text
    assert "local" in text and "1/1" in text
    assert "revisions are not tracked" in text
