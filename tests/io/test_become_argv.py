"""The one escalation point: what ``become`` turns a command into.

Pure: ``os.geteuid`` is the only fact read; the real sudo is exercised by
tests/deploy/test_become.py with a non-root user and a sudoers entry.
"""

from __future__ import annotations

import pytest

from inferfleet.io import become as become_module
from inferfleet.io.become import NO_BECOME, Become, for_scope, sudoers_line


@pytest.fixture
def not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(become_module.os, "geteuid", lambda: 1000)


def test_sudo_for_a_non_root_user_names_the_binary_by_absolute_path(not_root: None) -> None:
    argv = Become("h1", "sudo").argv(["systemctl", "daemon-reload"])
    assert argv[:3] == ["sudo", "-n", "--"]
    assert argv[3].startswith("/") and argv[3].endswith("/systemctl")
    assert argv[4:] == ["daemon-reload"]


def test_no_sudo_as_root_without_become_or_for_unprivileged_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(become_module.os, "geteuid", lambda: 0)
    assert Become("h1", "sudo").argv(["systemctl", "stop", "x"]) == ["systemctl", "stop", "x"]
    monkeypatch.setattr(become_module.os, "geteuid", lambda: 1000)
    assert Become("h1", None).argv(["systemctl", "stop", "x"]) == ["systemctl", "stop", "x"]
    assert Become("h1", "sudo").argv(["id"], privileged=False) == ["id"]


def test_user_scope_never_escalates(not_root: None) -> None:
    assert for_scope("h1", "sudo", "user") is NO_BECOME
    assert for_scope("h1", "sudo", "system").active


def test_the_sudoers_line_names_every_command_a_deploy_runs_through_sudo() -> None:
    line = sudoers_line("ops")
    assert line.startswith("ops ALL=(root) NOPASSWD: /")
    for name in ("systemctl", "journalctl", "podman", "install", "mv", "rm", "chmod", "ss"):
        assert f"/{name}" in line
