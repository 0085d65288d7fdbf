"""``become: sudo`` for real: a non-root user, a sudoers entry, the real sudo.

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
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.as_user import ensure_user, run_as
from helpers.cli import run_cli

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


@pytest.fixture(scope="module")
def lab() -> Iterator[dict[str, Path]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: it creates a test user and a sudoers drop-in")
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        pytest.skip("sudo is not installed (scripts/test installs it)")
    for name in (USER, NOPASS):
        ensure_user(name)
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
    """Run :func:`_child` as ``user`` (a forked copy of this process, helpers.as_user)."""
    return _as_job(user, lab, lambda state: _child(lab["root"], state, content, name))


def _as_job(
    user: str, lab: dict[str, Path], job: Callable[[Path], dict[str, object]]
) -> dict[str, object]:
    """``job(state_dir)`` as ``user``, with the stand-in systemctl first on PATH; the files
    archived under its state dir are added to its result."""
    state = Path(tempfile.mkdtemp(prefix="inferfleet-become-state-"))
    shutil.chown(state, user)
    try:
        env = {"HOME": str(state), "PATH": f"{lab['bin']}:/usr/bin:/bin"}
        result: dict[str, object] = run_as(user, lambda: job(state), env=env)
        result["archived"] = sorted(
            str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()
        )
        return result
    finally:
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
    # the replaced bytes were archived first, into the user's own state dir
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


def test_archive_restore_puts_a_root_owned_file_back_through_sudo(
    lab: dict[str, Path], cli: Any
) -> None:
    """A retired system unit and its root-only env file, archived by the
    ssh user through sudo, then `archive restore --become sudo` as that user: byte for
    byte, root's again, modes kept, the restore recorded in the entry's index."""
    folder = lab["root"] / "etc/systemd/system"
    unit, env = folder / "gone.service", folder / "gone.env"
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    unit.chmod(0o644)
    env.write_text("API_KEY=sk-root-only-0123456789\n")
    env.chmod(0o600)  # root's and root-only: the user reads it through sudo only
    before = {p: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in (unit, env)}
    assert cli("archive", "list", "--state-dir", str(lab["base"])).code == 0  # warm imports

    def job(state: Path) -> dict[str, object]:
        become = Become("lab1", "sudo")
        archive = Archive(state)
        Keeper(archive, service="gone", revision="r1", become=become).keep(
            [unit, env], reason="retire"
        )
        for path in (unit, env):
            become.remove(path)  # what a retirement does after archiving
        gone = not unit.exists() and not env.exists()
        (entry,) = archive.entries()
        refused = run_cli(pytest.MonkeyPatch(), "archive", "restore", entry.name,
                          "--state-dir", str(state))  # fmt: skip
        done = run_cli(pytest.MonkeyPatch(), "archive", "restore", entry.name,
                       "--state-dir", str(state), "--become", "sudo", "--json")  # fmt: skip
        restores = [(r.by, sorted(r.paths)) for r in archive.index(entry.name).restores]
        return {
            "gone": gone,
            "refused": [refused.code, refused.stderr],
            "done": [done.code, done.stdout, done.stderr],
            "restores": restores,
        }

    result = _as_job(USER, lab, job)
    assert result["gone"] is True
    code, stderr = result["refused"]  # type: ignore[misc]
    assert code == 1 and "internal error" not in stderr, stderr
    assert "--become sudo" in stderr and "nothing was restored" in stderr
    code, stdout, stderr = result["done"]  # type: ignore[misc]
    assert code == 0, stderr
    outcomes = {f["path"]: f["outcome"] for f in json.loads(stdout)["files"]}
    assert outcomes == {str(unit): "restored", str(env): "restored"}
    for path, (data, mode) in before.items():
        info = path.stat()
        assert path.read_bytes() == data and stat.S_IMODE(info.st_mode) == mode
        assert info.st_uid == 0  # root's file again, written by sudo install + mv
    assert result["restores"] == [["archive restore", sorted([str(unit), str(env)])]]
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
