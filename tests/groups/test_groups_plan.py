"""The deploy planner on a real git repository: a swap group is one unit (L-40)."""

from __future__ import annotations

from pathlib import Path

from group_fleet import BIG, GROUP, group_data, write
from helpers.git import git

from inferfleet.deploy import planner
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.markers import Marker


def _commit(folder: Path, data: dict[str, object], message: str) -> planner.FleetAtRevision:
    write(folder / "fleet.yaml", data)
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "--allow-empty", "-m", message)
    repo = Repo.containing(folder / "fleet.yaml")
    return planner.fleet_at(repo, repo.head(), "fleet.yaml")


def _deployed(at: planner.FleetAtRevision) -> dict[str, Marker]:
    return {
        name: Marker(
            service=name,
            host="local",
            revision=at.revision,
            inputs=at.inputs[name],
            backend="process",
            bind="127.0.0.1",
            port=8090,
            health_path="/health",
            applied_at=0.0,
            by="test",
        )
        for name in at.services_of("local")
    }


def test_a_group_is_planned_once_and_redeployed_when_a_member_changes(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    folder.mkdir()
    git(folder, "init", "-q")
    data = group_data(8090)
    at = _commit(folder, data, "a swap group")
    assert at.services_of("local") == [GROUP]
    first = planner.plan_host("local", at, {})
    assert [(i.service, i.action) for i in first.items] == [(GROUP, planner.DEPLOY)]
    markers = _deployed(at)
    kept = planner.plan_host("local", _commit(folder, data, "again"), markers)
    assert [(i.service, i.action) for i in kept.items] == [(GROUP, planner.KEEP)]
    data["services"][BIG]["parallel"] = 4  # type: ignore[index]
    changed = planner.plan_host("local", _commit(folder, data, "big: four slots"), markers)
    (item,) = changed.items
    assert (item.service, item.action) == (GROUP, planner.DEPLOY)
    assert any(BIG in reason for reason in item.reasons), item.reasons


def test_a_service_that_joins_a_group_retires_and_the_group_deploys(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    folder.mkdir()
    git(folder, "init", "-q")
    data = group_data(8090)
    alone = {**data["services"][BIG], "group": None}
    before = {**data, "services": {BIG: alone}, "groups": {}}
    at = _commit(folder, before, "big alone")
    markers = _deployed(at)
    assert list(markers) == [BIG]
    plan = planner.plan_host("local", _commit(folder, data, "big joins a group"), markers)
    assert [(i.service, i.action) for i in plan.items] == [
        (BIG, planner.RETIRE),
        (GROUP, planner.DEPLOY),
    ]
