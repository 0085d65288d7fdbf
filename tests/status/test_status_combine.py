"""How a row's state is decided from records, ssh facts and HTTP answers (pure, with data)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.real_server import fleet_data, write_fleet

from inferfleet.client.reports import ServerInfo, SlotUsage
from inferfleet.deploy.state import ServiceState
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.status.combine import Local, decide, host_unreachable, service_row
from inferfleet.status.endpoint import Reading
from inferfleet.status.model import Revision
from inferfleet.status.revisions import HostView

HEALTHY = Reading("healthy")
DOWN = Reading("down", "/health: connection refused or no route")
LOADING = Reading("loading", "/health: HTTP 503")
SSH_OK = HostView(over_ssh=True)


def ssh_with(**states: ServiceState) -> HostView:
    return HostView(states=dict(states), over_ssh=True)


def test_l33_an_answer_without_the_service_process_on_the_host_is_foreign() -> None:
    view = ssh_with(gemma=ServiceState("gemma", pid=None))
    state, why = decide("gemma", HEALTHY, view, None, unreachable=False)
    assert state == "foreign" and "L-33" in why


def test_l33_a_running_unit_whose_port_another_process_answers_is_foreign() -> None:
    view = ssh_with(gemma=ServiceState("gemma", pid=4242, healthy=False))
    state, why = decide("gemma", HEALTHY, view, None, unreachable=False)
    assert state == "foreign" and "pid 4242" in why


def test_healthy_only_when_the_host_saw_its_own_process_answer() -> None:
    view = ssh_with(gemma=ServiceState("gemma", pid=4242, healthy=True))
    # Even when this machine cannot reach the port (it binds the host's loopback).
    assert decide("gemma", DOWN, view, None, unreachable=False) == ("healthy", "")


def test_l34_a_loading_server_is_loading_not_down() -> None:
    view = ssh_with(gemma=ServiceState("gemma", pid=4242, healthy=False))
    assert decide("gemma", LOADING, view, None, unreachable=False)[0] == "loading"


def test_a_running_process_that_does_not_answer_is_unhealthy() -> None:
    view = ssh_with(gemma=ServiceState("gemma", pid=4242, healthy=False))
    state, why = decide("gemma", DOWN, view, None, unreachable=False)
    assert state == "unhealthy" and "pid 4242 runs" in why


def test_a_deployed_service_that_does_not_run_is_down() -> None:
    view = ssh_with(gemma=ServiceState("gemma", pid=None))
    assert decide("gemma", DOWN, view, None, unreachable=False)[0] == "down"


def test_without_ssh_facts_the_http_answer_decides() -> None:
    view = HostView(error="cannot reach the host over ssh: Connection refused", over_ssh=True)
    assert decide("gemma", HEALTHY, view, None, unreachable=False)[0] == "healthy"
    assert decide("gemma", DOWN, view, None, unreachable=False)[0] == "down"
    state, why = decide("gemma", DOWN, view, None, unreachable=True)
    assert state == "unreachable" and "Connection refused" in why


def test_this_machines_own_decision_wins() -> None:
    mine = Local("stale", 77, "record", detail="recorded pid 77 is gone")
    assert decide("gemma", HEALTHY, SSH_OK, mine, unreachable=False) == (
        "stale",
        "recorded pid 77 is gone",
    )
    # The state itself is decided once (inferfleet.deploy.state.decide); the table carries it
    # even when the HTTP reading alone would say otherwise.
    unit = Local("foreign", 88, "MainPID", detail="port answered by pid 9, not pid 88 (L-33)")
    assert decide("gemma", HEALTHY, SSH_OK, unit, unreachable=False)[0] == "foreign"
    looping = Local("crash-looping", None, detail="system:x.service restarted 5 time(s)")
    assert decide("gemma", DOWN, SSH_OK, looping, unreachable=False)[0] == "crash-looping"


# A service judged on its host (a loopback bind there): nothing read from here counts.
ON_HOST = Reading("unknown", "judged on its host: not read over HTTP from here")


@pytest.mark.parametrize(
    ("view", "expected", "why"),
    [
        (
            HostView(error="cannot reach the host over ssh: No route to host", over_ssh=True),
            "unknown",
            "host unreachable: cannot reach the host over ssh: No route to host",
        ),
        (HostView(error="not read over ssh (--no-ssh)"), "unknown", "not read on its host: "),
        (SSH_OK, "unknown", "its host's facts do not name it"),
        (ssh_with(gemma=ServiceState("gemma", pid=7, healthy=True)), "healthy", ""),
        (ssh_with(gemma=ServiceState("gemma", pid=None)), "down", "not running on the host"),
        (
            ssh_with(
                gemma=ServiceState("gemma", pid=None, state="foreign", detail="port held by pid 9")
            ),
            "foreign",
            "port held by pid 9",
        ),
        (ssh_with(gemma=ServiceState("gemma", pid=7)), "unhealthy", "pid 7 runs"),
    ],
)
def test_l33_a_service_judged_on_its_host_is_never_healthy_by_an_answer_here(
    view: HostView, expected: str, why: str
) -> None:
    # Whatever answers on this machine's loopback (HEALTHY), only the host's facts count.
    for reading in (HEALTHY, ON_HOST):
        state, detail = decide("gemma", reading, view, None, unreachable=True, on_host=True)
        assert (state, detail.startswith(why)) == (expected, True), detail


@pytest.mark.parametrize(
    ("is_local", "view", "readings", "expected"),
    [
        (True, HostView(), [DOWN], False),  # this machine is never unreachable
        (False, SSH_OK, [DOWN, DOWN], False),  # ssh answered: services are down, host is not
        (False, HostView(error="x", over_ssh=True), [DOWN, DOWN], True),
        (False, HostView(error="x", over_ssh=True), [DOWN, HEALTHY], False),
        (False, HostView(), [DOWN], True),  # no ssh asked, nothing answers
        (False, HostView(error="x", over_ssh=True), [], True),
        (False, HostView(), [], False),  # nothing asked at all: no evidence either way
    ],
)
def test_host_unreachable(
    is_local: bool, view: HostView, readings: list[Reading], expected: bool
) -> None:
    assert host_unreachable(is_local, view, readings) is expected


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedFleet:
    return load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(8080)))


def test_row_says_when_the_server_serves_another_window_than_the_fleet_promises(
    loaded: LoadedFleet,
) -> None:
    reading = Reading(
        "healthy",
        slots=SlotUsage(total=4, busy=3, ctx_per_slot=2048),
        series={"llamacpp:requests_processing": 3, "llamacpp:requests_deferred": 5},
        metrics="ok",
        info=ServerInfo(version="b1", model="gemma3-270m"),
    )
    mine = Local("healthy", 12, "record", 5.0, "0.6.0 (build 11434)")
    row = service_row(
        loaded,
        "gemma",
        "http://127.0.0.1:8080",
        reading,
        HostView(),
        mine,
        Revision("untracked"),
        None,
        unreachable=False,
    )
    assert (row.ctx_per_slot, row.parallel, row.slots, row.busy_slots) == (2048, 2, 4, 3)
    assert (row.requests_processing, row.requests_deferred) == (3, 5)
    assert row.runtime_version == "0.6.0 (build 11434)"  # the record's, over /props
    assert "serves 2048 tokens per slot, the fleet file says 4096 (L-25)" in row.notes
    assert "runs 4 slots, the fleet file says 2" in row.notes
    assert row.links == {
        "health": "http://127.0.0.1:8080/health",
        "api": "http://127.0.0.1:8080/v1",
        "models": "http://127.0.0.1:8080/v1/models",
        "slots": "http://127.0.0.1:8080/slots",
        "metrics": "http://127.0.0.1:8080/metrics",
    }


def test_a_down_row_keeps_the_fleet_declaration_and_no_live_numbers(loaded: LoadedFleet) -> None:
    row = service_row(
        loaded,
        "gemma",
        "http://127.0.0.1:8080",
        DOWN,
        HostView(),
        Local("stopped", detail="not running"),
        Revision("untracked"),
        None,
        unreachable=False,
    )
    assert row.state == "stopped"
    assert (row.ctx_per_slot, row.slots, row.busy_slots, row.requests_deferred) == (
        4096,
        2,
        None,
        None,
    )
    assert row.metrics == "-" and row.detail == "not running" and row.notes == []


def test_a_healthy_answer_without_host_facts_says_the_pid_is_unverified(
    loaded: LoadedFleet,
) -> None:
    row = service_row(
        loaded,
        "gemma",
        "http://127.0.0.1:8080",
        HEALTHY,
        HostView(error="not asked over ssh"),
        None,
        Revision("unknown"),
        None,
        unreachable=False,
    )
    assert row.state == "healthy" and row.pid is None
    assert "pid not verified: no facts from the host over ssh" in row.notes


def test_which_services_only_their_host_can_judge(tmp_path: Path) -> None:
    from inferfleet.render.endpoints import judged_on_host

    data = fleet_data(8080)
    base = data["services"]["gemma"]
    devices = data["hosts"]["local"]["devices"]
    data["hosts"]["far"] = {"address": "10.0.0.5", "devices": devices}
    data["hosts"]["nat"] = {"address": "10.0.0.6", "devices": devices, "health_from": "host"}
    open_ = {"exposure": {"level": "lan", "reason": "clients on the LAN"}}
    data["services"].update(
        {
            "far-loop": {**base, "host": "far", "bind": "127.0.0.1"},
            "far-v6loop": {**base, "host": "far", "bind": "::1"},
            "far-lan": {**base, "host": "far", "bind": "10.0.0.5", **open_},
            "nat-lan": {**base, "host": "nat", "bind": "10.0.0.6", **open_},
        }
    )
    fleet = load_fleet(write_fleet(tmp_path / "fleet.yaml", data)).fleet
    judged = {name: judged_on_host(fleet, s) for name, s in fleet.services.items()}
    assert judged == {
        "gemma": False,  # this machine's own: its loopback is ours
        "far-loop": True,  # far's loopback is not this machine's (L-33)
        "far-v6loop": True,
        "far-lan": False,  # reachable from here: read over HTTP, as clients do
        "nat-lan": True,  # the fleet says so
    }
