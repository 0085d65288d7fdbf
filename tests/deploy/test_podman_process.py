"""Real containers under the process backend: llama-server in a podman container, end to end.

The image is built here from the pinned llama-server and pinned by digest
(tests/helpers/containers.py); the model (Gemma 3 270M) is mounted read-only.
``up`` and ``apply`` run ``podman run`` in the foreground, recorded by pid;
the server itself is conmon's child, not podman's (conmon detaches), so the
health gate and the host's facts recognise it through the labelled
container's conmon and init (L-33), and still refuse a stranger.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml
from deploy_repo import FleetRepo, stop_recorded
from helpers.containers import (
    Image,
    container_fleet,
    container_pids,
    container_removed,
    llama_image,
    podman,
    podman_env,
    require_podman,
)

from inferfleet.backends import health as gate
from inferfleet.backends.ports import family_of, listeners
from inferfleet.backends.process import ProcessBackend, owner_pids
from inferfleet.errors import HealthError

pytestmark = [pytest.mark.containers, pytest.mark.needs_root, pytest.mark.slow]

NAME = "inferfleet-a"  # the container (and unit) name of service "a"


@pytest.fixture(scope="module")
def image() -> Image:
    require_podman()
    return llama_image()


@pytest.fixture(autouse=True)
def _podman(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in podman_env().items():
        monkeypatch.setenv(key, value)
    # A container of an earlier, killed run must not be taken for this test's.
    with container_removed(NAME):
        yield


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def record(state: Path) -> dict[str, Any]:
    return dict(json.loads((state / "services" / "a.json").read_text()))


def server_pid(port: int) -> int:
    [listener] = listeners(port, "127.0.0.1")
    assert listener.pid is not None
    return listener.pid


@pytest.fixture
def fleet_file(tmp_path: Path, image: Image, port: int, _isolated_state: Path) -> Iterator[Path]:
    path = write(tmp_path / "fleet" / "fleet.yaml", container_fleet(image.pinned, port, tmp_path))
    yield path
    stop_recorded(_isolated_state)


def test_up_runs_the_container_gated_then_keeps_restarts_logs_and_stops_it(
    cli: Any, fleet_file: Path, port: int, _isolated_state: Path, image: Image
) -> None:
    first = cli("up", str(fleet_file))
    assert first.code == 0, first.stderr + first.stdout
    rec = record(_isolated_state)
    assert rec["argv"][:2] == [rec["argv"][0], "run"] and image.pinned in rec["argv"]
    assert rec["extra"]["container"] == NAME
    # The server is the container's, not a descendant of the recorded podman (conmon
    # detaches): the gate found it through the container (L-33).
    pids = container_pids(NAME)
    assert pids is not None
    listener = server_pid(port)
    assert listener not in family_of(rec["pid"])
    assert listener in family_of(pids[0])
    labels = podman("container", "inspect", "--format", "{{json .Config.Labels}}", NAME).stdout
    assert json.loads(labels)["inferfleet.service"] == "a"
    marker = json.loads((_isolated_state / "markers" / "a.json").read_text())
    assert marker["contract"] == "passed"  # the contract probe ran against the container
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["id"] == "gemma3-270m"

    # Unchanged: kept, the same podman and container (the host's facts see it as ours).
    again = cli("up", str(fleet_file))
    assert again.code == 0, again.stderr
    assert record(_isolated_state)["pid"] == rec["pid"] and container_pids(NAME) == pids
    status = cli("status", "--file", str(fleet_file), "--json")
    assert status.code == 0, status.stderr
    [row] = json.loads(status.stdout)["services"]
    assert (row["service"], row["state"], row["pid"]) == ("a", "healthy", rec["pid"])

    # The log is the container's output.
    logs = cli("logs", "a", "--file", str(fleet_file), "-n", "400")
    assert logs.code == 0, logs.stderr
    assert (
        "--- inferfleet: starting at" in logs.stdout
        and f"listening on http://127.0.0.1:{port}" in logs.stdout
    )

    # A change restarts it: a new podman, a new container, the new argv inside.
    data = yaml.safe_load(fleet_file.read_text())
    data["services"]["a"]["parallel"] = 2
    write(fleet_file, data)
    changed = cli("up", str(fleet_file))
    assert changed.code == 0, changed.stderr + changed.stdout
    assert "restarted" in changed.stdout + changed.stderr
    new = record(_isolated_state)
    assert new["pid"] != rec["pid"] and not psutil.pid_exists(rec["pid"])
    assert container_pids(NAME) not in (None, pids)
    assert "--parallel" in new["argv"] and new["argv"][new["argv"].index("--parallel") + 1] == "2"

    # down: podman gone, the container removed, the port free.
    down = cli("down", "a", "--file", str(fleet_file))
    assert down.code == 0, down.stderr
    assert podman("container", "exists", NAME, check=False).returncode == 1
    assert not listeners(port, "127.0.0.1")
    assert not psutil.pid_exists(new["pid"])


def test_apply_deploys_changes_rolls_back_and_retires_the_container(
    cli: Any, tmp_path: Path, image: Image, port: int, _isolated_state: Path
) -> None:
    data = container_fleet(image.pinned, port, tmp_path / "cache")
    repo = FleetRepo.create(tmp_path / "repo", data, hosts=[])
    repo.states = {"here": _isolated_state}
    try:

        def apply() -> dict[str, Any]:
            done = cli("apply", "--file", str(repo.fleet_file), "--json")
            assert done.code == 0, done.stderr + done.stdout
            return dict(json.loads(done.stdout))

        assert [d["outcome"] for d in apply()["done"]] == ["deployed"]
        first = repo.head()
        first_pids = container_pids(NAME)
        assert first_pids is not None
        assert "--ctx-size" in repo.record("here", "a")["argv"]  # type: ignore[index]

        repo.data["services"]["a"]["ctx_per_slot"] = 2048
        second = repo.commit("a: 2048 per slot")
        assert [d["outcome"] for d in apply()["done"]] == ["deployed"]
        assert container_pids(NAME) not in (None, first_pids)
        argv = repo.record("here", "a")["argv"]  # type: ignore[index]
        assert argv[argv.index("--ctx-size") + 1] == "2048"
        marker = repo.marker("here", "a")
        assert marker is not None and marker["revision"] == second

        back = cli("rollback", "a", "--host", "here", "--file", str(repo.fleet_file), "--to", first)
        assert back.code == 0, back.stderr + back.stdout
        argv = repo.record("here", "a")["argv"]  # type: ignore[index]
        assert argv[argv.index("--ctx-size") + 1] == "1024"
        marker = repo.marker("here", "a")
        assert marker is not None and marker["revision"] == first
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200

        del repo.data["services"]["a"]
        repo.commit("retire a")
        assert [(d["service"], d["outcome"]) for d in apply()["done"]] == [("a", "retired")]
        assert podman("container", "exists", NAME, check=False).returncode == 1
        assert repo.record("here", "a") is None and repo.marker("here", "a") is None
        assert not listeners(port, "127.0.0.1")
    finally:
        stop_recorded(_isolated_state)


# ---------------------------------------------------------------- bad input


def test_an_absent_digest_is_refused_with_the_pull_command_and_nothing_starts(
    cli: Any, tmp_path: Path, image: Image, port: int
) -> None:
    absent = image.pinned.rpartition("@")[0] + "@sha256:" + "0" * 64
    fleet = write(tmp_path / "fleet.yaml", container_fleet(absent, port, tmp_path))
    done = cli("up", str(fleet))
    assert done.code == 1, done.stdout
    said = " ".join(done.stderr.split())
    assert f"image {absent} is not in podman's local storage" in said
    assert f"podman pull {absent}" in said and "Traceback" not in said
    assert podman("container", "exists", NAME, check=False).returncode == 1
    assert not (tmp_path / "state" / "services" / "a.json").exists()


def test_a_container_that_exits_at_once_fails_with_its_exit_code_and_log_tail(
    cli: Any, tmp_path: Path, image: Image, port: int, _isolated_state: Path
) -> None:
    data = container_fleet(image.pinned, port, tmp_path, extra_args=["--no-such-flag-here"])
    fleet = write(tmp_path / "fleet.yaml", data)
    done = cli("up", str(fleet))
    assert done.code == 1, done.stdout
    said = " ".join(done.stderr.split())
    assert "the server exited (status 1) before it became healthy" in said, done.stderr
    assert "--no-such-flag-here" in said  # llama-server's own complaint, from the log tail
    # Nothing left: no record, no marker, no container (--rm), nothing on the port.
    assert not (_isolated_state / "services" / "a.json").exists()
    assert not (_isolated_state / "markers" / "a.json").exists()
    assert podman("container", "exists", NAME, check=False).returncode == 1
    assert not listeners(port, "127.0.0.1")


def test_a_stale_container_of_ours_is_removed_and_a_strangers_refused(
    cli: Any, fleet_file: Path, image: Image, _isolated_state: Path
) -> None:
    # A crash left our container behind (the label says whose it is): removed, then started.
    podman("create", "--name", NAME, "--label", "inferfleet.service=a", image.tag, "--version")
    done = cli("up", str(fleet_file))
    assert done.code == 0, done.stderr + done.stdout
    assert container_pids(NAME) is not None
    assert cli("down", "a", "--file", str(fleet_file)).code == 0

    # Same name, not our label: someone else's; refused and left as it was (L-43).
    podman("create", "--name", NAME, "--label", "owner=someone", image.tag, "--version")
    refused = cli("up", str(fleet_file))
    assert refused.code == 1, refused.stdout
    said = " ".join(refused.stderr.split())
    assert f"a container named {NAME} exists (created) but is not service a's" in said
    assert podman("container", "exists", NAME, check=False).returncode == 0
    assert not (_isolated_state / "services" / "a.json").exists()


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def stranger(port: int) -> Iterator[None]:
    """Someone else's server answering 200 on 127.0.0.1:port (this test process)."""
    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), _Ok) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield
        finally:
            server.shutdown()


def test_a_stranger_on_the_port_is_refused_before_and_by_the_gate(
    cli: Any, fleet_file: Path, port: int, _isolated_state: Path, image: Image, tmp_path: Path
) -> None:
    # Before the start: the port is held, nothing is started.
    with stranger(port):
        refused = cli("up", str(fleet_file))
        assert refused.code == 1, refused.stdout
        assert f"port {port} is already held by pid" in " ".join(refused.stderr.split())
        assert podman("container", "exists", NAME, check=False).returncode == 1

    # The gate itself: our container runs (on another port), a stranger answers 200 on the
    # probed one. The container's processes are ours, the stranger is not: refused (L-33).
    other = int(port) + 1 if int(port) < 65000 else int(port) - 1
    data = container_fleet(image.pinned, other, tmp_path / "c2")
    started = cli("up", str(write(tmp_path / "other" / "fleet.yaml", data)))
    assert started.code == 0, started.stderr + started.stdout
    rec = record(_isolated_state)
    ours = ProcessBackend(_isolated_state).records.read("a")
    assert ours is not None and owner_pids(ours)
    with stranger(port), pytest.raises(HealthError) as caught:
        gate.wait_healthy(
            psutil.Process(rec["pid"]),
            service="a",
            bind="127.0.0.1",
            port=port,
            path="/health",
            timeout=1.0,
            owners=lambda: owner_pids(ours),
        )
    assert "answers 200, but the listening socket belongs to pid" in caught.value.message
    # ... while its own port passes the same identity check.
    passed = gate.wait_healthy(
        psutil.Process(rec["pid"]),
        service="a",
        bind="127.0.0.1",
        port=other,
        path="/health",
        timeout=30.0,
        owners=lambda: owner_pids(ours),
    )
    assert passed.states[-1] == "ok"
