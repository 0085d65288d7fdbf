"""``inferfleet apply`` on this machine: gates before anything is touched, kept services, dry runs.

A local host (127.0.0.1), the fake runtime and a tiny verified model; the
state dir is the test's own (INFERFLEET_STATE_DIR).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_repo import FleetRepo, local_fleet, stop_recorded

pytestmark = pytest.mark.slow


@pytest.fixture
def local_repo(
    tmp_path: Path, port: int, fake_runtime: Path, tiny_model: dict[str, Any], _isolated_state: Path
) -> Iterator[FleetRepo]:
    runtime = {"kind": "llama.cpp", "binary": str(fake_runtime)}
    data = local_fleet(runtime, tiny_model, port)
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
    repo.states = {"here": _isolated_state}
    yield repo
    stop_recorded(_isolated_state)


def apply(cli: Any, repo: FleetRepo, *args: str) -> Any:
    return cli("apply", "--file", str(repo.fleet_file), *args)


def test_apply_deploys_then_has_nothing_to_do(cli, local_repo: FleetRepo, port: int) -> None:
    first = apply(cli, local_repo, "--json")
    assert first.code == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["schema"] == "inferfleet.apply/v1" and doc["host"] == "here"
    assert [(d["service"], d["outcome"]) for d in doc["done"]] == [("a", "deployed")]
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    marker = local_repo.marker("here", "a")
    assert marker is not None and marker["revision"] == local_repo.head()
    again = apply(cli, local_repo)
    assert again.code == 0 and "nothing to apply" in again.stdout
    # Asked for by name, an unchanged healthy service is verified, not restarted.
    pid = local_repo.record("here", "a")["pid"]  # type: ignore[index]
    kept = json.loads(apply(cli, local_repo, "--service", "a", "--json").stdout)
    assert [(d["service"], d["outcome"]) for d in kept["done"]] == [("a", "kept")]
    assert local_repo.record("here", "a")["pid"] == pid  # type: ignore[index]

    facts = apply(cli, local_repo, "--facts")
    report = json.loads(facts.stdout)
    assert report["head"] == local_repo.head() and report["lock"] is None
    assert report["states"]["a"]["healthy"] is True and report["states"]["a"]["pid"] == pid
    assert set(report["markers"]) == {"a"}


def test_a_failing_gate_leaves_the_running_service_alone(
    cli, local_repo: FleetRepo, port: int
) -> None:
    assert apply(cli, local_repo).code == 0
    pid = local_repo.record("here", "a")["pid"]  # type: ignore[index]
    marker = local_repo.marker("here", "a")
    entry = local_repo.data["models"]["tiny"]["files"][0]
    entry["size"] += 1
    local_repo.commit("tiny: wrong size")
    failed = apply(cli, local_repo)
    assert failed.code == 1
    assert f"{entry['size'] - 1:,} bytes on disk, {entry['size']:,} declared" in failed.stderr
    assert "(L-08)" in failed.stderr and "nothing was stopped" in failed.stderr
    assert local_repo.record("here", "a")["pid"] == pid  # type: ignore[index]
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    assert local_repo.marker("here", "a") == marker


def test_unrecorded_files_are_hashed_once_wrong_ones_and_incomplete_splits_refused(
    cli, local_repo: FleetRepo, tmp_path: Path, port: int
) -> None:
    folder = tmp_path / "fresh-model"
    folder.mkdir()
    data = b"GGUF-never-verified"
    (folder / "m.gguf").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    local_repo.data["models"]["tiny"] = {
        "source": {"path": str(folder)},
        "files": [{"path": "m.gguf", "size": len(data), "sha256": sha}],
    }  # fmt: skip
    local_repo.commit("a model nobody verified")
    # No verification record: the gate hashes the file once, records it, and deploys.
    result = apply(cli, local_repo)
    assert result.code == 0, result.stderr
    record = json.loads((folder / ".inferfleet-verified.json").read_text())
    assert record["m.gguf"]["sha256"] == sha
    marker = local_repo.marker("here", "a")
    assert marker is not None
    pid = local_repo.record("here", "a")["pid"]  # type: ignore[index]

    # The fleet now declares other bytes: refused before anything is stopped (L-01).
    local_repo.data["models"]["tiny"]["files"][0]["sha256"] = "0" * 64
    local_repo.commit("tiny: another sha256")
    result = apply(cli, local_repo)
    assert result.code == 1
    assert f"m.gguf: sha256 {sha} on disk, {'0' * 64} declared (L-01)" in result.stderr
    assert "nothing was stopped" in result.stderr and "Traceback" not in result.stderr
    assert local_repo.marker("here", "a") == marker
    assert local_repo.record("here", "a")["pid"] == pid  # type: ignore[index]
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    assert "m.gguf" not in json.loads((folder / ".inferfleet-verified.json").read_text())

    parts = ["big-00001-of-00003.gguf", "big-00003-of-00003.gguf"]
    for name in parts:
        (folder / name).write_bytes(b"x")
    local_repo.data["models"]["tiny"]["files"] = [{"path": p, "size": 1} for p in parts]
    local_repo.commit("a split with a part missing")
    result = apply(cli, local_repo)
    assert result.code == 1
    assert "split big has 3 parts but 2 are declared (missing part 2)" in result.stderr


def test_dry_run_and_dirty_trees(cli, local_repo: FleetRepo) -> None:
    dry = apply(cli, local_repo, "--dry-run")
    assert dry.code == 0
    assert "a: gate" in dry.stdout and "a: start" in dry.stdout and "a: marker" in dry.stdout
    assert local_repo.marker("here", "a") is None and local_repo.record("here", "a") is None
    local_repo.fleet_file.write_text(local_repo.fleet_file.read_text() + "# wip\n")
    dirty = apply(cli, local_repo)
    assert dirty.code == 2 and "uncommitted changes (fleet.yaml)" in dirty.stderr
    assert local_repo.marker("here", "a") is None


def test_which_host_and_which_service_errors(cli, local_repo: FleetRepo) -> None:
    unknown = apply(cli, local_repo, "--service", "nope")
    assert unknown.code == 2 and "'nope' does not run on host 'here'" in unknown.stderr
    wrong = apply(cli, local_repo, "--host", "elsewhere")
    assert wrong.code == 2 and "host 'elsewhere' is not in fleet.yaml" in wrong.stderr
    events = apply(cli, local_repo, "--host", "elsewhere", "--events")
    assert events.code == 2
    line = json.loads(events.stdout.strip().splitlines()[-1])
    assert line["event"] == "error" and "elsewhere" in line["message"]
