"""Status of a remote host read over real ssh: pids, own-process health (L-33) and markers.

The "remote" hosts are this machine behind a real OpenSSH server on a loopback
port (see tests/helpers/sshd.py), reached by the deploy connector through an ssh
config, running ``inferfleet apply --facts`` in the host's checkout: the same
read ``plan`` does. Host ``far`` runs the real llama-server (its state dir
holds the server's record and a marker); host ``near`` claims a service on
the same port but runs nothing, so the answer there comes from a process
that is not its own.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import free_port
from helpers.git import git
from helpers.real_server import SERVICE, Served, fleet_data, served, write_fleet
from helpers.sshd import Sshd, loopback_sshd

from inferfleet.deploy import planner
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.markers import Marker, MarkerStore
from inferfleet.deploy.ssh import SshConnector, Target
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.status import Options, collect

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]

# The hosts run this interpreter's inferfleet, with the deploy verbs registered.
REMOTE = (
    "from inferfleet.cli import app; "
    "app.VERBS.setdefault('apply', ('deploy_cmd', 'register')); app.main()"
)


@pytest.fixture
def gemma(tmp_path: Path) -> Iterator[Served]:
    fleet = write_fleet(tmp_path / "up" / "fleet.yaml", fleet_data(free_port()))
    with served(fleet, tmp_path / "far-state") as running:
        yield running


@pytest.fixture
def sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sshd]:
    aliases = {"far.example": "127.0.0.1", "near.example": "127.0.0.2"}
    with loopback_sshd(tmp_path / "sshd", free_port(), aliases) as d:
        # Short: a socket path may not exceed 108 bytes, and pytest's tmp paths are long.
        control = Path(tempfile.mkdtemp(prefix="ifst", dir="/tmp"))
        monkeypatch.setenv("INFERFLEET_SSH_CONFIG", str(d.client_config))
        monkeypatch.setenv("INFERFLEET_SSH_CONTROL_DIR", str(control))
        monkeypatch.setenv(
            "INFERFLEET_REMOTE_COMMAND", f"{shlex.quote(sys.executable)} -c {shlex.quote(REMOTE)}"
        )
        try:
            yield d
        finally:
            for alias in ("far", "near"):  # close the masters before their server goes
                SshConnector(Target(alias, f"{alias}.example")).close()
            shutil.rmtree(control, ignore_errors=True)


def test_remote_facts_over_ssh_give_pid_own_process_health_and_revision(
    gemma: Served, sshd: Sshd, tmp_path: Path
) -> None:
    repo_dir = tmp_path / "fleet"
    data = fleet_data(gemma.port)
    devices = data["hosts"].pop("local")["devices"]
    near_state = tmp_path / "near-state"
    for name, state in (("far", gemma.state_dir), ("near", near_state)):
        data["hosts"][name] = {
            "address": f"{name}.example",
            "checkout": str(repo_dir),
            "state_dir": str(state),
            "devices": devices,
        }
    data["services"][SERVICE]["host"] = "far"
    data["services"]["ghost"] = {**data["services"][SERVICE], "host": "near", "alias": "ghost"}
    path = write_fleet(repo_dir / "fleet.yaml", data)
    git(repo_dir, "init", "-q", "-b", "main")
    git(repo_dir, "add", "-A")
    git(repo_dir, "commit", "-q", "-m", "fleet")
    head = Repo(repo_dir).head()
    inputs = planner.fleet_at(Repo(repo_dir), head, "fleet.yaml").inputs[SERVICE]
    MarkerStore(gemma.state_dir).write(
        Marker(SERVICE, "far", head, inputs, "process", "127.0.0.1", gemma.port, "/health",
               time.time(), "test@here")
    )  # fmt: skip

    status = collect(load_fleet(path), options=Options(timeout=10.0))
    hosts = {h.host: h for h in status.hosts}
    assert hosts["far"].reach == "ssh", hosts["far"].detail
    assert hosts["far"].checkout_head == head and hosts["far"].lock is None
    rows = {r.service: r for r in status.services}

    far = rows[SERVICE]
    assert far.state == "healthy", far.notes
    assert (far.pid, far.pid_source) == (gemma.pid, "record")
    assert far.revision.state == "current" and far.revision.deployed == head
    assert not any("not verified" in note for note in far.notes)
    # Bound to far's loopback, it is judged on far alone (its facts, over ssh): nothing is
    # read over HTTP from here, so slots and model are the fleet file's (busy: not known).
    assert (far.slots, far.busy_slots, far.model) == (2, None, "gemma3-270m")
    assert any("judged on host far over ssh" in note for note in far.notes)

    ghost = rows["ghost"]
    assert hosts["near"].reach == "ssh"
    assert ghost.state == "foreign"
    # Decided on the host (deploy.state.decide): it names the stranger holding the port.
    assert f"port held by pid {gemma.pid}" in ghost.detail and "(L-35)" in ghost.detail
    assert ghost.revision.state == "new"


def test_a_proxy_on_another_host_is_asked_over_tls_with_the_root_its_host_sends(
    gemma: Served, sshd: Sshd, tmp_path: Path
) -> None:
    """Under tls internal the proxy's CA root lives in its host's state dir. Its host's
    facts (over ssh) carry the root, and status asks Caddy over TLS from here, trusting
    only that root: healthy while it answers, down once it stops, and unknown (never
    green) when the facts could not be read."""
    from inferfleet.deploy import frontdoor
    from inferfleet.deploy.facts import host_facts
    from inferfleet.install import caddy as caddy_tool

    caddy_tool.install()  # the pinned binary (cached)
    repo_dir = tmp_path / "fleet"
    data = fleet_data(gemma.port)
    devices = data["hosts"].pop("local")["devices"]
    data["hosts"]["far"] = {
        "address": "far.example",
        "checkout": str(repo_dir),
        "state_dir": str(gemma.state_dir),
        "devices": devices,
    }
    data["services"][SERVICE]["host"] = "far"
    keys = tmp_path / "proxy.env"
    keys.write_text("INFERFLEET_PROXY_KEY=sk-" + "k" * 32 + "\n")
    keys.chmod(0o600)
    port = free_port()
    data["proxy"] = {
        "host": "far",
        "bind": "127.0.0.1",  # far is this machine behind sshd: its loopback is ours
        "port": port,
        "exposure": {"level": "lan", "reason": "the test reaches it on this machine"},
        "keys_env": str(keys),
        "services": [SERVICE],
    }
    path = write_fleet(repo_dir / "fleet.yaml", data)
    git(repo_dir, "init", "-q", "-b", "main")
    git(repo_dir, "add", "-A")
    git(repo_dir, "commit", "-q", "-m", "a fleet with its proxy on far")
    loaded = load_fleet(path)
    proxy = loaded.fleet.proxy
    assert proxy is not None and not loaded.fleet.hosts["far"].is_local("far")
    started = frontdoor.deploy(loaded.fleet, host_facts(repo_dir), gemma.state_dir, "proxy")
    try:
        assert started["action"] == "started"
        row = collect(loaded, options=Options(timeout=10.0)).proxy
        assert row is not None and row.host == "far"
        assert row.state == "healthy", row.detail
        assert row.pid is None  # its record is on far: no pid is claimed from here
        assert "no key here" in row.detail  # far's key file is far's: upstreams not asked

        # Without ssh the root is not read: unknown, with why; never green.
        blind = collect(loaded, options=Options(timeout=10.0, ssh=False)).proxy
        assert blind is not None and blind.state == "unknown"
        assert "not read over ssh (--no-ssh)" in blind.detail
    finally:
        frontdoor.stop(gemma.state_dir, "proxy", grace=5.0)
    # Stopped: far still sends the root, and nothing answers on the proxy's port.
    after = collect(loaded, options=Options(timeout=10.0)).proxy
    assert after is not None and after.state == "down", after.detail
