"""Retirement to an archive (issue 15, item 2): real applies file what they remove or replace.

A local host, the fake runtime and a tiny verified model; the state dir is
the test's own. Retiring a systemd service runs the real planner and the
real retirement; this machine has no systemd as PID 1, so ``systemctl`` on
PATH is a stand-in that records its arguments and succeeds (the real one is
exercised by test_systemd_nspawn.py). Retirement follows L-40 (a service
gone from the fleet is undone) and L-41 (what ran is known from the marker
outside the checkout); the archived env and settings files hold secrets and
stay private (L-54, L-55).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploy_repo import FleetRepo

from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.markers import Marker, MarkerStore

pytestmark = pytest.mark.slow

TEMPLATE = 'api_key: "${API_KEY}"\n'
UNIT = "[Unit]\nDescription=old\n[Service]\nExecStart=/bin/true\n"
ENV = "API_KEY=sk-old-0123456789\n"


@pytest.fixture
def fake_systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "systemctl.log"
    script = folder / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 0\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return log


@pytest.fixture
def repo(
    tmp_path: Path,
    port: int,
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    _isolated_state: Path,
) -> Iterator[FleetRepo]:
    secrets = tmp_path / "private" / "a.env"
    secrets.parent.mkdir()
    secrets.write_text("API_KEY=sk-first-0123456789\n")
    secrets.chmod(0o600)
    data = {
        "version": 1,
        "hosts": {"here": {"address": "127.0.0.1"}},
        "runtimes": {"fake": {"kind": "llama.cpp", "binary": str(fake_runtime)}},
        "models": {"tiny": copy.deepcopy(tiny_model)},
        "services": {
            "a": {
                "host": "here",
                "runtime": "fake",
                "model": "tiny",
                "port": port,
                "ctx_per_slot": 512,
                "health": {"timeout": "20s"},
                "settings": [{
                    "template": "settings/a.yml",
                    "dest": str(tmp_path / "etc" / "a" / "settings.yml"),
                    "allow": ["API_KEY"],
                    "env_files": [str(secrets)],
                }],
            },
        },
    }  # fmt: skip
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
    repo.commit("the settings template", {"settings/a.yml": TEMPLATE})
    repo.states = {"here": _isolated_state}
    yield repo
    for record in (_isolated_state / "services").glob("*.json"):
        with contextlib.suppress(ProcessLookupError, ValueError, KeyError):
            os.kill(json.loads(record.read_text())["pid"], signal.SIGKILL)


def apply(cli: Any, repo: FleetRepo, *args: str) -> tuple[Any, list[dict[str, Any]]]:
    result = cli("apply", "--file", str(repo.fleet_file), "--events", *args)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return result, events


def archive_list(cli: Any, state: Path) -> list[dict[str, Any]]:
    result = cli("archive", "list", "--state-dir", str(state), "--json")
    assert result.code == 0, result.stderr
    return list(json.loads(result.stdout)["entries"])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_replaced_settings_are_archived_private_with_their_revision(
    cli, repo: FleetRepo, tmp_path: Path, _isolated_state: Path
) -> None:
    dest = tmp_path / "etc" / "a" / "settings.yml"
    result, _ = apply(cli, repo)
    assert result.code == 0, result.stderr
    first = repo.head()
    assert archive_list(cli, _isolated_state) == []  # a new file replaces nothing
    old = dest.read_bytes()

    (tmp_path / "private" / "a.env").write_text("API_KEY=sk-second-0123456789\n")
    result, events = apply(cli, repo, "--service", "a")
    assert result.code == 0, result.stderr
    assert b"sk-second" in dest.read_bytes()
    steps = [e for e in events if e.get("event") == "step" and e.get("kind") == "archive"]
    assert len(steps) == 1 and str(dest) in steps[0]["detail"]
    assert "sk-first" not in result.stdout  # the events name the file, never its content

    (entry,) = archive_list(cli, _isolated_state)
    assert (entry["service"], entry["reason"], entry["revision"]) == ("a", "replace", first)
    assert entry["files"] == [
        {
            "path": str(dest),
            "mode": "0600",
            "sha256": hashlib.sha256(old).hexdigest(),
            "size": len(old),
        }
    ]
    folder = Path(entry["folder"])
    copy_ = folder / "files" / str(dest).lstrip("/")
    assert copy_.read_bytes() == old and mode(copy_) == 0o600
    assert mode(folder) == 0o700 and mode(_isolated_state / "archive") == 0o700
    assert mode(folder / "index.json") == 0o600


def test_retire_then_restore_gives_back_byte_identical_files_and_modes(
    cli, repo: FleetRepo, tmp_path: Path, _isolated_state: Path, fake_systemctl: Path
) -> None:
    units = tmp_path / "units"
    units.mkdir()
    unit, env = units / "inferfleet-old.service", units / "old.env"
    unit.write_text(UNIT)
    unit.chmod(0o644)
    env.write_text(ENV)
    env.chmod(0o600)
    earlier = repo.head()
    MarkerStore(_isolated_state).write(
        Marker(
            service="old",
            host="here",
            revision=earlier,
            inputs=ServiceInputs({}, {}),
            backend="systemd",
            bind="127.0.0.1",
            port=9,
            health_path="/health",
            applied_at=0.0,
            by="ops@laptop",
            unit="inferfleet-old",
            scope="user",
            installed=[str(unit), str(env)],
        )
    )
    result, events = apply(cli, repo)
    assert result.code == 0, result.stderr
    done = {d["service"]: d["outcome"] for d in events[-1]["result"]["done"]}
    assert done["old"] == "retired"
    assert not unit.exists() and not env.exists()
    assert "--user daemon-reload" in fake_systemctl.read_text()
    assert MarkerStore(_isolated_state).read("old") is None

    (entry,) = [e for e in archive_list(cli, _isolated_state) if e["service"] == "old"]
    assert entry["reason"] == "retire" and entry["revision"] == earlier
    assert entry["entry"].endswith(f"-old-{earlier[:12]}-retire")
    assert {f["path"]: f["mode"] for f in entry["files"]} == {
        str(unit): "0644",
        str(env): "0600",
    }

    state = str(_isolated_state)
    restored = cli("archive", "restore", entry["entry"], "--state-dir", state, "--json")
    assert restored.code == 0, restored.stderr
    doc = json.loads(restored.stdout)
    assert {f["path"]: f["outcome"] for f in doc["files"]} == {
        str(unit): "restored",
        str(env): "restored",
    }
    assert unit.read_text() == UNIT and mode(unit) == 0o644
    assert env.read_text() == ENV and mode(env) == 0o600

    # Again: nothing to do. A different file there is refused, then archived when forced.
    again = cli("archive", "restore", entry["entry"], "--state-dir", state, "--json")
    assert {f["outcome"] for f in json.loads(again.stdout)["files"]} == {"unchanged"}
    env.write_text("API_KEY=edited-by-hand\n")
    refused = cli("archive", "restore", entry["entry"], "--state-dir", state)
    assert refused.code == 1 and "exists with other bytes" in refused.stderr
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert env.read_text() == "API_KEY=edited-by-hand\n"
    forced = cli("archive", "restore", entry["entry"], "--state-dir", state, "--force", "--json")
    assert forced.code == 0, forced.stderr
    outcomes = {f["path"]: f["outcome"] for f in json.loads(forced.stdout)["files"]}
    assert outcomes == {str(unit): "unchanged", str(env): "overwritten"}
    assert env.read_text() == ENV
    (kept,) = [e for e in archive_list(cli, _isolated_state) if e["reason"] == "overwrite"]
    copy_ = Path(kept["folder"]) / "files" / str(env).lstrip("/")
    assert copy_.read_text() == "API_KEY=edited-by-hand\n"
