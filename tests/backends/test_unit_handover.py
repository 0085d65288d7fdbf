"""A Quadlet unit's main process changes once without a restart: ``podman run --sdnotify``
is MainPID until it names conmon (``MAINPID=``) and exits. The unit gate follows that
handover and nothing else (a crash, a restart, a stop still fail it at once)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inferfleet.backends.systemd import UnitState, handed_over

PODMAN_RUN = UnitState("u.service", "loaded", "activating", "start", 100, 0, "success", "")
CONMON = replace(PODMAN_RUN, main_pid=112)


@pytest.mark.parametrize(
    ("now", "containers", "followed"),
    [
        (CONMON, True, True),  # podman run -> conmon, still starting
        (replace(CONMON, active="active", sub="running"), True, True),  # and started
        (CONMON, False, False),  # a plain unit: a new MainPID is a new process
        (replace(CONMON, restarts=1), True, False),  # Restart= ran it again: a crash
        (replace(CONMON, active="deactivating"), True, False),  # stopping
        (replace(CONMON, main_pid=0, active="failed"), True, False),  # gone
        (PODMAN_RUN, True, False),  # the same process: its own failure stands
    ],
)
def test_the_gate_follows_only_a_handover(now: UnitState, containers: bool, followed: bool) -> None:
    assert handed_over(PODMAN_RUN, now, containers=containers) is followed
