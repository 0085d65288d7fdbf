"""A rollback brings a retired service back from the archive.

Deploy a service with a settings file (L-54), retire it (the next commit
drops it: its settings are archived, then removed, L-40), then ``rollback``
to the revision that ran it: the settings file comes back from the archive
entry, byte for byte and with its mode, the output and JSON say "restored
from archive: ENTRY", the entry's index records the restore, and the service
is healthy again (L-33, L-41). When what the revision renders differs from
the archived copy (the host's env file changed since), the entry is left
alone and the file is rendered as usual. A local host (the local connector
runs apply in this checkout), the fake runtime and a tiny verified model.
"""

from __future__ import annotations

import hashlib
import json
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_repo import FleetRepo

# The settings test's fleet (service a, a settings template, the host's env file).
from test_apply_settings import apply, dest, repo, secrets  # noqa: F401  (the fixtures)

pytestmark = pytest.mark.slow


def entries(cli: Any, state: Path) -> list[dict[str, Any]]:
    listed = cli("archive", "list", "--state-dir", str(state), "--json")
    assert listed.code == 0, listed.stderr
    return list(json.loads(listed.stdout)["entries"])


def deploy_then_retire(cli: Any, fleet: FleetRepo, settings: Path) -> tuple[str, bytes]:
    """Deploy a, then retire it; returns the revision that ran it and its settings bytes."""
    subprocess.run(["git", "-C", str(fleet.operator), "remote", "remove", "origin"], check=True)
    result, _ = apply(cli, fleet)
    assert result.code == 0, result.stderr
    first = fleet.head()
    marker = fleet.marker("here", "a")
    assert marker is not None and marker["settings"] == [str(settings)]
    original = settings.read_bytes()

    del fleet.data["services"]["a"]  # a fleet of no services: a is retired
    fleet.commit("retire a")
    result, events = apply(cli, fleet)
    assert result.code == 0, result.stderr
    assert [(d["service"], d["outcome"]) for d in events[-1]["result"]["done"]] == [
        ("a", "retired")
    ]
    assert not settings.exists()  # archived, then removed: no secrets left behind
    assert fleet.marker("here", "a") is None
    return first, original


@dataclass
class Retired:
    fleet: FleetRepo
    settings: Path  # the settings file's path on the host
    first: str  # the revision that ran a
    original: bytes  # its settings file as that revision rendered it
    entry: dict[str, Any]  # the archive entry of the retirement, as `archive list` shows it

    def parts(self) -> tuple[FleetRepo, Path, str, bytes, dict[str, Any]]:
        return self.fleet, self.settings, self.first, self.original, self.entry


@pytest.fixture
def retired(cli: Any, request: pytest.FixtureRequest, _isolated_state: Path) -> Retired:
    fleet, settings = request.getfixturevalue("repo"), request.getfixturevalue("dest")
    first, original = deploy_then_retire(cli, fleet, settings)
    (entry,) = entries(cli, _isolated_state)
    return Retired(fleet, settings, first, original, entry)


def test_rollback_of_a_retired_service_restores_its_files_from_the_archive(
    cli, retired: Retired, _isolated_state: Path, port: int
) -> None:
    fleet, settings, first, original, entry = retired.parts()
    assert (entry["service"], entry["reason"], entry["revision"]) == ("a", "retire", first)
    assert [f["path"] for f in entry["files"]] == [str(settings)]
    assert entry["restores"] == []

    # No --to: a retired service goes back to the revision its archive entry recorded.
    back = cli("rollback", "a", "--host", "here", "--file", str(fleet.fleet_file))
    assert back.code == 0, back.stderr + back.stdout
    said = " ".join((back.stderr + back.stdout).split())  # rich wraps long lines
    assert f"restored from archive: {entry['entry']} ({settings}, mode 0600)" in said
    assert f"restored from archive: {entry['entry']} (1 file)" in said

    # Byte-identical with its mode, from the archive; the service serves again.
    assert settings.read_bytes() == original
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    marker = fleet.marker("here", "a")
    assert marker is not None and marker["revision"] == first

    # The index says when, by which apply; the entry stays (only prune deletes).
    (after,) = entries(cli, _isolated_state)
    assert after["entry"] == entry["entry"] and after["files"] == entry["files"]
    (restore,) = after["restores"]
    assert restore["by"] == "apply" and restore["paths"] == [str(settings)]
    assert restore["by_revision"] == first


def test_rollback_of_a_service_never_deployed_names_what_to_pass(
    cli, retired: Retired, _isolated_state: Path
) -> None:
    file = str(retired.fleet.fleet_file)
    unknown = cli("rollback", "nothing", "--host", "here", "--file", file)
    assert unknown.code == 2 and "Traceback" not in unknown.stderr
    assert "no earlier revision recorded for 'nothing'" in unknown.stderr
    assert "--to REV" in unknown.stderr and "archive list" in unknown.stderr
    assert entries(cli, _isolated_state) == [retired.entry]  # nothing touched


def test_an_archived_copy_that_does_not_match_the_revision_is_left_alone(
    cli, retired: Retired, request: pytest.FixtureRequest, _isolated_state: Path, port: int
) -> None:
    fleet, settings, first, original, entry = retired.parts()
    env_file = request.getfixturevalue("secrets")

    # The host's env file changed since: the revision now renders other bytes.
    env_file.write_text("API_KEY=sk-rotated-0123456789\nENDPOINT=http://127.0.0.1:9/v1\n")
    result, events = apply(cli, fleet, "--service", "a", "--rev", first)
    assert result.code == 0, result.stderr
    (done,) = events[-1]["result"]["done"]
    assert done["outcome"] == "deployed" and done["restored"] == []
    assert not [e for e in events if e.get("kind") == "restore"]
    assert b"sk-rotated" in settings.read_bytes()
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200

    # The entry is untouched: same copy, no restore recorded.
    (after,) = entries(cli, _isolated_state)
    assert after == entry
    copy_ = Path(after["folder"]) / "files" / str(settings).lstrip("/")
    assert copy_.read_bytes() == original
    assert hashlib.sha256(original).hexdigest() == after["files"][0]["sha256"]


def test_a_damaged_archived_copy_is_reported_and_the_file_rendered(
    cli, retired: Retired, _isolated_state: Path
) -> None:
    fleet, settings, first, original, entry = retired.parts()
    copy_ = Path(entry["folder"]) / "files" / str(settings).lstrip("/")
    copy_.write_bytes(original.replace(b"sk-first", b"sk-evil!"))  # same size, other bytes

    result, events = apply(cli, fleet, "--service", "a", "--rev", first)
    assert result.code == 0, result.stderr
    (note,) = [e for e in events if e.get("kind") == "restore"]
    assert note["detail"].startswith(f"not restored from archive: {entry['entry']}")
    assert "does not match its index" in note["detail"]
    assert settings.read_bytes() == original  # rendered, not the tampered copy
    (done,) = events[-1]["result"]["done"]
    assert done["restored"] == []
    assert entries(cli, _isolated_state)[0]["restores"] == []


def test_apply_json_names_the_entry_each_file_came_from(
    cli, retired: Retired, _isolated_state: Path
) -> None:
    fleet, settings, first, original, entry = retired.parts()
    back = cli("apply", "--file", str(fleet.fleet_file), "--service", "a", "--rev", first, "--json")
    assert back.code == 0, back.stderr + back.stdout
    (done,) = json.loads(back.stdout)["done"]
    assert done["outcome"] == "deployed" and done["contract"] == "passed"
    assert done["restored"] == [{"entry": entry["entry"], "path": str(settings)}]
    assert settings.read_bytes() == original
