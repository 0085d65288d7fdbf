"""After `up`, the follow-up verbs find what it ran: with no fleet file found, status,
down, logs, probe and bench use the fleet `up` last ran on this machine, and say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import free_port
from helpers.cli import run_cli
from helpers.real_server import fleet_data, write_fleet

from inferfleet.deploy import last_up

NOTE = "`inferfleet up` last ran on this machine"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with no fleet file in it or above it (a git repository's top)."""
    monkeypatch.delenv("INFERFLEET_FILE", raising=False)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """A fleet (one service of this machine, not running) that `up` last ran."""
    fleet = write_fleet(tmp_path / "mine" / "fleet.yaml", fleet_data(free_port()))
    last_up.remember(fleet, example=False)
    return fleet


def test_the_follow_up_verbs_use_the_fleet_up_last_ran(
    elsewhere: Path, ran: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = run_cli(monkeypatch, "status")
    assert status.code == 1, status.stderr  # found; its service does not run (not exit 2)
    assert NOTE in status.stderr and str(ran) in status.stderr
    assert "gemma" in status.stdout and "stopped" in status.stdout
    down = run_cli(monkeypatch, "down")
    assert down.code == 0, down.stderr
    assert NOTE in down.stderr and "gemma: not-running" in down.stdout
    logs = run_cli(monkeypatch, "logs", "gemma")
    assert NOTE in logs.stderr and "no fleet file" not in logs.stderr


def test_the_embedded_example_is_named_as_such(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inferfleet.cli.fleet_cmds import embedded_example

    last_up.remember(embedded_example(), example=True)
    result = run_cli(monkeypatch, "status")
    assert f"using the embedded example fleet, which {NOTE}" in " ".join(result.stderr.split())
    assert result.code in {0, 1} and "gemma" in result.stdout


def test_a_fleet_file_found_or_given_wins_over_the_record(
    elsewhere: Path, ran: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fleet(elsewhere / "fleet.yaml", fleet_data(free_port()))
    result = run_cli(monkeypatch, "status", "--json")
    assert NOTE not in result.stderr and '"file": "fleet.yaml"' in result.stdout
    given = run_cli(monkeypatch, "status", "--file", "fleet.yaml")
    assert NOTE not in given.stderr and str(ran) not in given.stderr


def test_without_a_record_or_when_its_file_is_gone_no_fleet_file_is_exit_2(
    elsewhere: Path, ran: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran.unlink()
    for verb in (["status"], ["down"], ["probe", "gemma"]):
        result = run_cli(monkeypatch, *verb)
        assert result.code == 2, (verb, result.stderr)
        assert "no fleet file" in result.stderr and NOTE not in result.stderr


def test_a_damaged_record_is_a_clear_error_and_left_as_it_is(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = last_up.record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for damaged in ('{"file": 3}', "[]", '{"file": "rel/fleet.yaml", "example": false, "at": 1}'):
        path.write_text(damaged)
        result = run_cli(monkeypatch, "status")
        assert result.code == 2, result.stderr
        assert "the record of the last up" in result.stderr and "is damaged" in result.stderr
        assert f"remove {path}" in " ".join(result.stderr.split())
        assert "Traceback" not in result.stderr
        assert path.read_text() == damaged
