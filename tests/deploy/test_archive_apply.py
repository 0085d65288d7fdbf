"""Retirement to an archive: real applies file what they remove or replace.

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

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

# The settings test's fleet (service a, a settings template, the host's env file).
from test_apply_settings import apply, dest, repo, secrets  # noqa: F401  (the fixtures)

from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.markers import Marker, MarkerStore

pytestmark = pytest.mark.slow

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


def archive_list(cli: Any, state: Path) -> list[dict[str, Any]]:
    result = cli("archive", "list", "--state-dir", str(state), "--json")
    assert result.code == 0, result.stderr
    return list(json.loads(result.stdout)["entries"])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def fixtures(request: pytest.FixtureRequest, *names: str) -> list[Any]:
    return [request.getfixturevalue(name) for name in names]


def test_replaced_settings_are_archived_private_with_their_revision(
    cli, request: pytest.FixtureRequest, _isolated_state: Path
) -> None:
    fleet, settings, env_file = fixtures(request, "repo", "dest", "secrets")
    result, _ = apply(cli, fleet)
    assert result.code == 0, result.stderr
    first = fleet.head()
    assert archive_list(cli, _isolated_state) == []  # a new file replaces nothing
    old = settings.read_bytes()

    env_file.write_text("API_KEY=sk-second-0123456789\nENDPOINT=http://127.0.0.1:9/v1\n")
    result, events = apply(cli, fleet, "--service", "a")
    assert result.code == 0, result.stderr
    assert b"sk-second" in settings.read_bytes()
    steps = [e for e in events if e.get("event") == "step" and e.get("kind") == "archive"]
    assert len(steps) == 1 and str(settings) in steps[0]["detail"]
    assert "sk-first" not in result.stdout  # the events name the file, never its content

    (entry,) = archive_list(cli, _isolated_state)
    assert (entry["service"], entry["reason"], entry["revision"]) == ("a", "replace", first)
    assert entry["files"] == [
        {
            "path": str(settings),
            "mode": "0600",
            "sha256": hashlib.sha256(old).hexdigest(),
            "size": len(old),
        }
    ]
    folder = Path(entry["folder"])
    copy_ = folder / "files" / str(settings).lstrip("/")
    assert copy_.read_bytes() == old and mode(copy_) == 0o600
    assert mode(folder) == 0o700 and mode(_isolated_state / "archive") == 0o700
    assert mode(folder / "index.json") == 0o600


def test_retire_then_restore_gives_back_byte_identical_files_and_modes(
    cli, request: pytest.FixtureRequest, tmp_path: Path, _isolated_state: Path, fake_systemctl: Path
) -> None:
    (fleet,) = fixtures(request, "repo")
    units = tmp_path / "units"
    units.mkdir()
    unit, env = units / "inferfleet-old.service", units / "old.env"
    unit.write_text(UNIT)
    unit.chmod(0o644)
    env.write_text(ENV)
    env.chmod(0o600)
    earlier = fleet.head()
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
    result, events = apply(cli, fleet)
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

    by_host = cli("archive", "list", "--file", str(fleet.fleet_file), "--host", "here", "--json")
    assert json.loads(by_host.stdout)["archive"] == str(_isolated_state / "archive")
    unknown = cli("archive", "list", "--file", str(fleet.fleet_file), "--host", "nope")
    assert unknown.code == 2 and "host 'nope' is not in" in unknown.stderr

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


def test_an_archive_others_can_read_fails_the_deploy_before_anything_is_stopped(
    cli, request: pytest.FixtureRequest, _isolated_state: Path
) -> None:
    """Copies of settings files hold secrets (L-54, L-55): a loose archive is refused early."""
    fleet, settings, env_file = fixtures(request, "repo", "dest", "secrets")
    result, _ = apply(cli, fleet)
    assert result.code == 0, result.stderr
    pid = fleet.record("here", "a")["pid"]
    before = settings.read_bytes()
    (_isolated_state / "archive").mkdir(exist_ok=True)
    (_isolated_state / "archive").chmod(0o755)
    env_file.write_text("API_KEY=sk-second-0123456789\nENDPOINT=http://127.0.0.1:9/v1\n")
    result, events = apply(cli, fleet, "--service", "a")
    assert result.code == 1
    failed = events[-1]["result"]["failed"]
    assert "not a private folder" in failed["message"] and "lets others in" in failed["message"]
    assert not any(e.get("kind") in {"stop", "write-settings"} for e in events)
    assert fleet.record("here", "a")["pid"] == pid and settings.read_bytes() == before
