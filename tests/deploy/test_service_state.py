"""One decision of a service's state, from facts captured as data (no host needed).

Every verb (status, up, apply, the board, deploy gates) reads this one
decision; each case below is a reading that once fooled a health check.
"""

from __future__ import annotations

import pytest

from inferfleet.backends.systemd import parse_show
from inferfleet.deploy.state import (
    CRASH_LOOPING,
    FOREIGN,
    HEALTHY,
    LOADING,
    STALE,
    STOPPED,
    UNHEALTHY,
    HealthFact,
    RecordFact,
    ServiceFacts,
    ServiceState,
    UnitFact,
    decide,
)

URL = "http://127.0.0.1:8080/health"


def record(*, same: bool = True, now: str = "") -> RecordFact:
    return RecordFact(
        pid=4242,
        same_process=same,
        now_running=now,
        spec="abc",
        bind="127.0.0.1",
        port=8080,
        health_path="/health",
        started_at=1000.0,
        runtime_version="version: 11434 (b11434)",
    )


def health(
    answer: str, *, owned: bool = True, status: int | None = 200, holder: str = ""
) -> HealthFact:
    return HealthFact(URL, answer, status, [4242], owned=owned, holder=holder)


def test_its_own_process_answering_200_is_healthy() -> None:
    state = decide(ServiceFacts("gemma", record(), health=health("ok")))
    assert (state.state, state.pid, state.healthy, state.process_spec) == (
        HEALTHY,
        4242,
        True,
        "abc",
    )
    assert state.runtime_version == "version: 11434 (b11434)"


def test_503_from_its_own_process_is_loading_not_a_failure() -> None:  # L-34
    state = decide(ServiceFacts("gemma", record(), health=health("loading", status=503)))
    assert state.state == LOADING and not state.healthy


def test_another_process_answering_on_the_port_is_foreign() -> None:  # L-33
    holder = "pid 99 (python3 -m http.server) on 127.0.0.1:8080"
    state = decide(ServiceFacts("gemma", record(), health=health("ok", owned=False, holder=holder)))
    assert state.state == FOREIGN and not state.healthy
    assert "pid 99" in state.detail and "not pid 4242" in state.detail


def test_a_reused_pid_is_a_stale_record_and_never_ours() -> None:  # L-43
    state = decide(ServiceFacts("gemma", record(same=False, now="bash")))
    assert state.state == STALE and state.pid is None and state.process_spec is None
    assert state.detail == "recorded pid 4242 now belongs to 'bash'"
    gone = decide(ServiceFacts("gemma", record(same=False)))
    assert gone.detail == "recorded pid 4242 is gone"


def test_a_stranger_on_a_stopped_services_port_is_foreign() -> None:  # L-35
    facts = ServiceFacts(
        "gemma",
        None,
        health=HealthFact(URL, "ok", 200, [77], owned=False, holder="pid 77 (nc -l 8080)"),
    )
    assert decide(facts).state == FOREIGN


def test_nothing_at_all_is_stopped() -> None:
    state = decide(ServiceFacts("gemma", None, health=HealthFact(URL, "down", None)))
    assert (state.state, state.pid, state.detail) == (STOPPED, None, "not running")


def test_a_running_process_that_does_not_answer_is_unhealthy() -> None:
    state = decide(ServiceFacts("gemma", record(), health=health("down", status=None)))
    assert state.state == UNHEALTHY and "does not answer" in state.detail
    err = decide(ServiceFacts("gemma", record(), health=health("error", status=500)))
    assert err.state == UNHEALTHY and "HTTP 500" in err.detail


# Captured `systemctl show` output of a unit that keeps dying (Restart=on-failure).
AUTO_RESTART = """\
ActiveState=activating
SubState=auto-restart
MainPID=0
NRestarts=7
ExecMainStatus=1
"""
RUNNING = """\
ActiveState=active
SubState=running
MainPID=5151
NRestarts=0
ExecMainStatus=0
"""


def unit_fact(text: str) -> UnitFact:
    shown = parse_show("inferfleet-gemma.service", text)
    return UnitFact(shown.active, shown.sub, shown.main_pid, shown.restarts)


def test_a_unit_that_keeps_restarting_is_crash_looping_from_captured_systemctl_output() -> None:
    units = {"system:inferfleet-gemma.service": unit_fact(AUTO_RESTART)}
    # A stale server still answering on the port must not make it look healthy (L-33).
    stale_answer = HealthFact(URL, "ok", 200, [31337], owned=False, holder="pid 31337 (old)")
    state = decide(ServiceFacts("gemma", None, units, health=stale_answer))
    assert state.state == CRASH_LOOPING and not state.healthy
    assert "restarted 7 time(s)" in state.detail
    assert state.units == {"system:inferfleet-gemma.service": "activating/auto-restart"}


def test_a_running_unit_is_judged_by_its_main_pid() -> None:
    units = {"user:inferfleet-gemma.service": unit_fact(RUNNING)}
    facts = ServiceFacts("gemma", None, units, health=health("ok"))
    state = decide(facts)
    assert (state.state, state.pid) == (HEALTHY, 5151)
    assert state.unit_running("user", "inferfleet-gemma.service")


@pytest.mark.parametrize(
    "data",
    [
        {"service": "gemma", "state": "healthy", "pid": 1, "healthy": True},
        # An older host's report: fields this side does not know are ignored.
        {"service": "gemma", "pid": None, "future_field": [1, 2]},
    ],
)
def test_state_round_trips_through_a_hosts_json_report(data: dict[str, object]) -> None:
    state = ServiceState.from_json(data)
    assert state.service == "gemma"
    assert ServiceState.from_json(state.to_json()) == state
