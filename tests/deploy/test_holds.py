"""Holds as data: the store (hostile files included), the planner's ``held`` items, a host's
report of them, and the journal a log reader asks for per scope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_repo import FleetRepo
from test_planner import actions, base_fleet, deployed, head_of

from inferfleet.backends.systemd import Systemctl
from inferfleet.deploy import planner
from inferfleet.deploy.errors import RemoteError
from inferfleet.deploy.holds import Hold, HoldError, HoldStore, new_hold
from inferfleet.deploy.rollout import HostReport
from inferfleet.errors import UsageError
from inferfleet.io.become import Become


def test_a_hold_round_trips_and_a_damaged_one_is_a_clear_error(tmp_path: Path) -> None:
    store = HoldStore(tmp_path)
    assert store.read("chat") is None and store.all() == {}
    hold = new_hold("chat", "  swap the PSU  ")
    store.write(hold)
    assert store.read("chat") == hold and hold.reason == "swap the PSU"
    assert hold.describe().startswith("held: swap the PSU, since ") and "@" in hold.by
    for text in ("{half", "[]", json.dumps({**hold.to_json(), "reason": "bell\x07"})):
        store.path("chat").write_text(text)
        with pytest.raises(HoldError) as caught:
            store.read("chat")
        assert str(store.path("chat")) in caught.value.where
        assert "inferfleet start" in caught.value.hint
    assert store.remove("chat") and not store.remove("chat")


@pytest.mark.parametrize("reason", ["", "   ", "x" * 201, "tab\there", "esc\x1b[2J"])
def test_a_reason_that_is_not_one_printable_line_is_refused(reason: str) -> None:
    with pytest.raises(UsageError, match="one printable line"):
        new_hold("chat", reason)


def test_a_held_service_is_planned_held_and_never_selected(tmp_path: Path) -> None:
    repo = FleetRepo.create(tmp_path / "fleet", base_fleet(), hosts=[])
    _git, at = head_of(repo)
    hold = Hold("chat", "disk swap", 0.0, "ops@atlas")
    for markers in ({}, deployed(at, "h1")):  # held whether or not a marker is there
        plan = planner.plan_host("h1", at, markers, holds={"chat": hold})
        assert actions(plan)["chat"] == "held"
        assert plan.item("chat").reasons == [hold.describe()]  # type: ignore[union-attr]
        assert "chat" not in [i.service for i in plan.changes()]
        assert "chat" not in [i.service for i in planner.select(plan)]
        assert "chat" not in [i.service for i in planner.select(plan, drain=True)]
        with pytest.raises(UsageError, match="is held: disk swap") as caught:
            planner.select(plan, services=["chat"])
        assert "inferfleet start chat" in caught.value.hint


def test_a_hosts_report_of_holds_is_checked_by_shape() -> None:
    good = Hold("chat", "disk swap", 1.0, "ops@atlas").to_json()
    base = {"host": "h1", "head": "0" * 40}
    report = HostReport.from_json({**base, "holds": {"chat": good}}, host="h1")
    assert report.holds["chat"].reason == "disk swap"
    for bad in (
        {"chat": {**good, "reason": "red\x1b[31m"}},
        {"chat": {**good, "service": "other"}},
        {"chat": {**good, "since": "yesterday"}},
        {"chat": "held"},
    ):
        with pytest.raises(RemoteError, match="host h1 sent a facts report"):
            HostReport.from_json({**base, "holds": bad}, host="h1")


def test_the_journal_asked_for_per_scope() -> None:
    sudo = Become("h1", "sudo", uid=1000)
    system = Systemctl("system", sudo).journal_argv("inferfleet-chat.service", 50, "-f")
    assert system[:3] == ["sudo", "-n", "--"] and system[3].endswith("journalctl")
    assert system[4:] == ["-u", "inferfleet-chat.service", "-n", "50", "--no-pager", "--all",
                          "-f"]  # fmt: skip
    # A user unit never escalates, and is matched in every journal file the user may read.
    user = Systemctl("user", sudo).journal_argv("inferfleet-chat.service", 5)
    assert user == ["journalctl", "--user-unit", "inferfleet-chat.service", "-n", "5",
                    "--no-pager", "--all"]  # fmt: skip
