"""``become: sudo`` for real (issue 16, item 2): a non-root user, a sudoers entry, the real sudo.

The test process is root; a child Python runs as a test user (``runuser``)
and installs a system unit into a root-owned folder through the one
escalation point (:mod:`inferfleet.io.become`) as ``apply`` does: the
Keeper archives what it replaces and writes through ``sudo -n install`` +
``sudo -n mv``; ``systemctl`` of system scope runs through ``sudo -n`` (a
stand-in on PATH records its argv: there is no systemd as PID 1 here). A
user whose sudo wants a password gets the clear error and nothing is
half-written. Boot persistence of system units is L-38.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferfleet.backends.systemd import Systemctl
from inferfleet.checks import topics  # noqa: F401  (registers the rules)
from inferfleet.checks.engine import run_checks
from inferfleet.errors import FleetError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io.archive import Archive, Keeper
from inferfleet.io.become import Become

pytestmark = pytest.mark.slow

USER = "iftest-become"
NOPASS = "iftest-nopass"
SUDOERS = Path("/etc/sudoers.d/inferfleet-test-become")


def _child(root: Path, state: Path, content: str, name: str) -> dict[str, object]:
    """What apply does for a system unit: archive + install through sudo, systemctl per scope."""
    become = Become("lab1", "sudo")
    keeper = Keeper(Archive(state), service="web", revision="r1", become=become)
    unit = root / "etc/systemd/system" / name
    try:
        changed = keeper.replace(unit, content, mode=0o644)
        Systemctl("system", become).daemon_reload()
        Systemctl("user", become).daemon_reload()
    except FleetError as exc:
        return {"ok": False, "message": exc.message, "where": exc.where, "hint": exc.hint}
    return {"ok": True, "changed": changed}


def _ensure_user(name: str) -> None:
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)


@pytest.fixture(scope="module")
def lab() -> Iterator[dict[str, Path]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: it creates a test user and a sudoers drop-in")
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        pytest.skip("sudo is not installed (scripts/test installs it)")
    for name in (USER, NOPASS):
        _ensure_user(name)
    base = Path(tempfile.mkdtemp(prefix="inferfleet-become-"))
    try:
        base.chmod(0o755)
        bin_dir = base / "bin"
        bin_dir.mkdir(mode=0o755)
        log = base / "systemctl.log"
        stand_in = bin_dir / "systemctl"
        stand_in.write_text(f'#!/bin/sh\necho "$(id -u) $@" >> {log}\nexit 0\n')
        stand_in.chmod(0o755)
        log.write_text("")
        log.chmod(0o666)  # the user scope runs as the test user
        root = base / "root"  # root-owned, 0755: the test user cannot write there
        (root / "etc/systemd/system").mkdir(parents=True, mode=0o755)
        for path in (root, root / "etc", root / "etc/systemd"):
            path.chmod(0o755)
        allowed = ", ".join(
            [str(stand_in), *(shutil.which(c) or f"/usr/bin/{c}" for c in ("install", "mv", "rm"))]
        )
        draft = base / "sudoers"
        draft.write_text(f"{USER} ALL=(root) NOPASSWD: {allowed}\n")
        subprocess.run(["visudo", "-cf", str(draft)], check=True, capture_output=True)
        shutil.copyfile(draft, SUDOERS)
        SUDOERS.chmod(0o440)
        yield {"base": base, "bin": bin_dir, "log": log, "root": root}
    finally:
        SUDOERS.unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)


def _as(
    user: str, lab: dict[str, Path], content: str, name: str = "web.service"
) -> dict[str, object]:
    """Run :func:`_child` as ``user`` in a forked copy of this process.

    Forked, not exec'd: this interpreter may live where the test user cannot
    read (a root-only pyenv); the code it needs is already imported.
    """
    state = Path(tempfile.mkdtemp(prefix="inferfleet-become-state-"))
    shutil.chown(state, user)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user for good, then do what apply does
        code = 1
        try:
            os.close(read)
            info = pwd.getpwnam(user)
            os.initgroups(user, info.pw_gid)
            os.setgid(info.pw_gid)
            os.setuid(info.pw_uid)
            os.environ.update(
                USER=user, LOGNAME=user, HOME=str(state), PATH=f"{lab['bin']}:/usr/bin:/bin"
            )
            result = _child(lab["root"], state, content, name)
            os.write(write, json.dumps(result).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        result: dict[str, object] = json.loads(b"".join(chunks))
        result["archived"] = sorted(
            str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()
        )
        return result
    finally:
        os.close(read)
        shutil.rmtree(state, ignore_errors=True)


def test_sudo_installs_a_system_unit_atomically_and_runs_system_systemctl(
    lab: dict[str, Path],
) -> None:
    unit = lab["root"] / "etc/systemd/system/web.service"
    first = _as(USER, lab, "[Service]\nExecStart=/bin/true\n")
    assert first["ok"] is True and first["changed"] is True, first
    info = unit.stat()
    assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o644  # root's file, by sudo
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"
    assert [p.name for p in unit.parent.iterdir()] == ["web.service"]  # no staged file left
    lines = lab["log"].read_text().splitlines()
    uid = subprocess.run(["id", "-u", USER], capture_output=True, text=True).stdout.strip()
    # system scope through sudo (runs as root), user scope as the user itself
    assert lines == ["0 daemon-reload", f"{uid} --user daemon-reload"]

    second = _as(USER, lab, "[Service]\nExecStart=/bin/false\n")
    assert second["ok"] is True and second["changed"] is True, second
    assert unit.read_text() == "[Service]\nExecStart=/bin/false\n"
    # the replaced bytes were archived first (issue 15), into the user's own state dir
    assert any(a.endswith("etc/systemd/system/web.service") for a in second["archived"])  # type: ignore[union-attr]


def test_sudo_wanting_a_password_is_a_clear_error_and_nothing_is_written(
    lab: dict[str, Path],
) -> None:
    unit = lab["root"] / "etc/systemd/system/other.service"
    result = _as(NOPASS, lab, "[Service]\nExecStart=/bin/true\n", "other.service")
    assert result["ok"] is False
    message, where, hint = str(result["message"]), str(result["where"]), str(result["hint"])
    assert "needs root" in message and "password" in message and "install" in message
    assert "host lab1" in where and NOPASS in where
    assert f"{NOPASS} ALL=(root) NOPASSWD:" in hint and "/etc/sudoers.d" in hint
    assert not unit.exists()
    assert sorted(p.name for p in unit.parent.iterdir()) in ([], ["web.service"])


HOMELAB = """
version: 1
hosts:
  h1:
    address: 10.0.0.1
    ssh: {user: ops}
    %s
runtimes: {}
models: {}
services:
  box:
    kind: container
    host: h1
    image: docker.io/library/busybox@sha256:%s
    backend: quadlet
    port: 8080
    unit: {scope: system}
    container: {health_cmd: "true"}
"""


@pytest.mark.parametrize(("extra", "hits"), [("", 1), ("become: sudo", 0)])
def test_check_rule_system_unit_without_become(tmp_path: Path, extra: str, hits: int) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(HOMELAB % (extra, "0" * 64))
    report = run_checks(load_fleet(path))
    found = [f for f in report.findings if f.rule == "system-unit-without-become"]
    assert len(found) == hits
    if hits:
        assert "ops" in found[0].message and "become: sudo" in found[0].hint
