"""``become: sudo`` for real: deploy, retire and roll back system units as a
non-root ssh user on a host where systemd really runs.

The host is a systemd-nspawn container (deploy_nspawn.py) with its own sshd
and a user ``ops`` whose sudoers entry is inferfleet's own line
(:func:`~inferfleet.io.become.sudoers_line`). ``deploy`` from here reaches it
over real ssh as ``ops``; ``apply`` there installs the unit and env file into
root's ``/etc`` through ``sudo -n install`` + ``mv``, runs ``systemctl`` of
the system scope through ``sudo -n`` and holds the unit to its health gate
(L-33, L-34). Retiring it archives its files into ``ops``'s state dir and
removes them through sudo (L-40); ``rollback`` brings them back
from the archive, byte for byte and root's again, and the service serves.
One container for the module (a boot costs seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_nspawn import Machine, SshLogin, sudo_host
from deploy_repo import FleetRepo
from helpers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.needs_root]
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ENTRY = HERE / "inferfleet_entry.py"
UNIT = "/etc/systemd/system/inferfleet-web.service"
ENV = "/etc/inferfleet/env/web.env"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Machine, Path, SshLogin]]:
    shared = tmp_path_factory.mktemp("nspawn-become")
    with sudo_host(shared, "ifb") as (machine, login):
        yield machine, shared, login


def sudo_fleet(
    shared: Path,
    login: SshLogin,
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    *,
    prefix: str = "",
    extra_args: tuple[str, ...] = (),
) -> tuple[FleetRepo, int, Path, Path]:
    """A fleet repo under ``shared`` whose one service ``web`` is a system unit on the box's
    host ``sd``, deployed as ``ops`` with ``become: sudo``; the ssh settings of this test set.
    ``prefix`` keeps the folders of several tests of the module apart.
    (repo, port, state dir, the ssh control dir to close)."""
    folder = shared / f"{prefix}fleet"
    runtime = shared / f"{prefix}llama-server"
    runtime.write_text(fake_runtime.read_text())
    runtime.chmod(0o755)
    model = shared / f"{prefix}tiny"
    model.mkdir()
    shutil.copyfile(Path(tiny_model["source"]["path"]) / "tiny.gguf", model / "tiny.gguf")
    model.chmod(0o755)
    (model / "tiny.gguf").chmod(0o644)
    port = free_port()
    state = folder / "hosts" / "sd" / "state"
    data = {
        "version": 1,
        "hosts": {"sd": {"address": login.alias, "ssh": {"user": login.user}, "become": "sudo",
                         "checkout": str(folder / "hosts" / "sd" / "fleet"),
                         "state_dir": str(state)}},
        "runtimes": {"fake": {"kind": "llama.cpp", "binary": str(runtime)}},
        "models": {"tiny": {**tiny_model, "source": {"path": str(model)}}},
        "services": {"web": {"host": "sd", "runtime": "fake", "model": "tiny", "port": port,
                             "ctx_per_slot": 512, "backend": "systemd",
                             "extra_args": list(extra_args),
                             "unit": {"scope": "system"}, "health": {"timeout": "20s"}}},
    }  # fmt: skip
    repo = FleetRepo.create(folder, data, hosts=["sd"])
    repo.states = {"sd": state}
    return repo, port, state, deploy_as(login, repo, folder, monkeypatch)


def deploy_as(
    login: SshLogin, repo: FleetRepo, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Make ``login`` the owner of the host's checkout and state under ``folder``/hosts and
    point this test's ssh at it; returns the ssh control dir (closed by the test)."""
    # The host's checkout is ops's (it pulls); the remote stays ours, readable by all (the
    # container's git trusts any owner: safe.directory, set in the box fixture).
    subprocess.run(["chown", "-R", f"{login.uid}:{login.uid}", str(folder / "hosts")], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(repo.remote)], check=True)
    control = Path(tempfile.mkdtemp(prefix="ifbs", dir="/tmp"))
    for key, value in {
        "INFERFLEET_SSH_CONFIG": str(login.config),
        "INFERFLEET_SSH_CONTROL_DIR": str(control),
        # The entry puts this checkout's src first, whichever checkout the venv came from.
        "INFERFLEET_REMOTE_COMMAND": f"{sys.executable} {ENTRY}",
    }.items():
        monkeypatch.setenv(key, value)
    return control


def close_ssh(login: SshLogin, control: Path) -> None:
    """Close the test's ssh master to the box and remove its control dir."""
    subprocess.run(["ssh", "-F", str(login.config), "-o", f"ControlPath={control}/%C",
                    "-O", "exit", login.alias], capture_output=True, timeout=10)  # fmt: skip
    shutil.rmtree(control, ignore_errors=True)


def _stat(machine: Machine, path: str) -> tuple[int, str]:
    uid, mode = machine.enter("stat", "-c", "%u %a", path).split()
    return int(uid), mode


def test_deploy_retire_and_rollback_system_units_through_sudo(
    box: tuple[Machine, Path, SshLogin],
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine, shared, login = box
    repo, port, state, control = sudo_fleet(shared, login, fake_runtime, tiny_model, monkeypatch)
    ran = repo.head()  # the revision that runs web
    fleet = str(repo.fleet_file)
    try:
        first = cli("deploy", "sd", "-y", "--file", fleet, "--json")
        assert first.code == 0, first.stderr + first.stdout
        (run,) = json.loads(first.stdout)["hosts"]
        assert [(d["service"], d["outcome"]) for d in run["result"]["done"]] == [
            ("web", "deployed")
        ]
        # Root's files in root's folders, written by ops through sudo; the unit runs.
        assert _stat(machine, UNIT) == (0, "644")
        assert _stat(machine, ENV)[0] == 0
        assert _stat(machine, "/etc/systemd/system")[0] == 0
        shown = machine.systemctl_show("inferfleet-web.service", "ActiveState", "UnitFileState",
                                       "User")  # fmt: skip
        assert shown == {"ActiveState": "active", "UnitFileState": "enabled", "User": "ops"}
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        marker = repo.marker("sd", "web")
        assert marker is not None and marker["scope"] == "system" and UNIT in marker["installed"]
        assert os.stat(state / "markers" / "web.json").st_uid == login.uid
        journal = machine.enter("journalctl", "--no-pager", "-q", "_COMM=sudo", check=False)
        for command in ("/usr/bin/install", "/usr/bin/mv", "/usr/bin/systemctl daemon-reload"):
            assert f"USER=root ; COMMAND={command}" in journal, journal[-2000:]
        before = {p: machine.enter("cat", p) for p in (UNIT, ENV)}
        modes = {p: _stat(machine, p) for p in (UNIT, ENV)}

        # Retired by the next commit: stopped, disabled, archived, removed through sudo.
        del repo.data["services"]["web"]
        repo.commit("retire web")
        retired = cli("deploy", "sd", "-y", "--file", fleet, "--json")
        assert retired.code == 0, retired.stderr + retired.stdout
        gone = machine.systemctl_show("inferfleet-web.service", "LoadState", "ActiveState")
        assert gone == {"LoadState": "not-found", "ActiveState": "inactive"}
        assert machine.enter("ls", "/etc/systemd/system/", "/etc/inferfleet/env/").count("web") == 0
        (entry,) = [p for p in (state / "archive").iterdir() if p.name.endswith("-retire")]
        index = json.loads((entry / "index.json").read_text())
        assert sorted(f["path"] for f in index["files"]) == sorted([ENV, UNIT])

        # Rolled back: the files come back from the archive through sudo, root's again.
        # No --to: the host's archive says which revision web ran when it was retired.
        back = cli("rollback", "web", "--host", "sd", "--file", fleet)
        assert back.code == 0, back.stderr + back.stdout
        said = " ".join((back.stderr + back.stdout).split())
        assert f"restored from archive: {entry.name} (2 files)" in said
        for path, content in before.items():
            assert machine.enter("cat", path) == content
            assert _stat(machine, path) == modes[path]
        shown = machine.systemctl_show("inferfleet-web.service", "ActiveState", "UnitFileState")
        assert shown == {"ActiveState": "active", "UnitFileState": "enabled"}
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        marker = repo.marker("sd", "web")
        assert marker is not None and marker["revision"] == ran
        restores = json.loads((entry / "index.json").read_text())["restores"]
        assert [(r["by"], sorted(r["paths"]), r["by_revision"]) for r in restores] == [
            ("apply", sorted([ENV, UNIT]), ran)
        ]
    finally:
        subprocess.run(["ssh", "-F", str(login.config), "-o", f"ControlPath={control}/%C",
                        "-O", "exit", login.alias], capture_output=True, timeout=10)  # fmt: skip
        machine.enter("systemctl", "stop", "inferfleet-web.service", check=False)
        shutil.rmtree(control, ignore_errors=True)
