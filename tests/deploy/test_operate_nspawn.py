"""stop / start / restart / logs and holds of a system unit on a real systemd, over real ssh,
as a non-root user with ``become: sudo``.

The host is test_become_nspawn's container (its own sshd, a user ``ops`` with
inferfleet's sudoers line). Every verb runs here, through the real entry
point: the service's host is remote, so the verb reaches it over ssh and runs
there in the host's checkout, where ``systemctl`` and ``journalctl`` of the
system scope go through ``sudo -n``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_nspawn import Machine, SshLogin
from deploy_repo import FleetRepo
from helpers import free_port
from test_become_nspawn import ENTRY, ROOT, sudo_fleet
from test_become_nspawn import box as box  # noqa: F401  (the module's container)

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.needs_root]
UNIT = "inferfleet-web.service"


def health(port: int) -> int | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=3).status_code
    except httpx.HTTPError:
        return None


def test_stop_hold_start_restart_and_logs_of_a_system_unit_through_sudo(
    box: tuple[Machine, Path, SshLogin],  # noqa: F811
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    machine, shared, login = box
    repo, port, state, control = sudo_fleet(
        shared, login, fake_runtime, tiny_model, monkeypatch, prefix="ops-",
        extra_args=("--x-bad-bytes",),
    )  # fmt: skip
    fleet = str(repo.fleet_file)
    try:
        first = cli("deploy", "sd", "-y", "--file", fleet)
        assert first.code == 0, first.stderr + first.stdout
        assert health(port) == 200

        # The unit's journal, read through sudo there; a line that is not UTF-8 arrives
        # with replacement characters.
        logs = cli("logs", "web", "--file", fleet, "-n", "20")
        assert logs.code == 0, logs.stderr + logs.stdout
        assert f"fake llama-server listening on 127.0.0.1:{port}" in logs.stdout
        assert "not utf-8: \ufffd\ufffd end" in logs.stdout
        journal = machine.enter("journalctl", "--no-pager", "-q", "_COMM=sudo", check=False)
        assert "COMMAND=/usr/bin/journalctl -u inferfleet-web.service" in journal

        held = cli("stop", "web", "--file", fleet, "--hold", "kernel update")
        assert held.code == 0, held.stderr + held.stdout
        assert "web on sd: stopped" in held.stdout and "held: kernel update" in held.stdout
        shown = machine.systemctl_show(UNIT, "ActiveState", "UnitFileState")
        assert shown == {"ActiveState": "inactive", "UnitFileState": "disabled"}
        assert health(port) is None
        assert json.loads((state / "holds" / "web.json").read_text())["reason"] == "kernel update"

        # A deploy of a new revision leaves it down and says so; plan shows why.
        repo.data["services"]["web"]["health"]["timeout"] = "25s"
        repo.commit("web: longer gate")
        again = cli("deploy", "sd", "-y", "--file", fleet)
        assert again.code == 0, again.stderr + again.stdout
        assert "left down: web (held: kernel update" in " ".join(again.stderr.split())
        assert machine.systemctl_show(UNIT, "ActiveState") == {"ActiveState": "inactive"}
        plan = json.loads(cli("plan", "--file", fleet, "--json").stdout)
        [item] = plan["hosts"][0]["items"]
        assert item["action"] == "held" and "kernel update" in item["reasons"][0]
        refused = cli("restart", "web", "--file", fleet)
        assert refused.code == 2 and "inferfleet start web" in refused.stdout + refused.stderr

        started = cli("start", "web", "--file", fleet)
        assert started.code == 0, started.stderr + started.stdout
        shown = machine.systemctl_show(UNIT, "ActiveState", "UnitFileState", "MainPID")
        assert shown["ActiveState"] == "active" and shown["UnitFileState"] == "enabled"
        assert health(port) == 200
        assert not (state / "holds" / "web.json").exists()
        marker = repo.marker("sd", "web")
        assert marker is not None and marker["revision"] == repo.head()

        restarted = cli("restart", "web", "--file", fleet)
        assert restarted.code == 0, restarted.stderr + restarted.stdout
        assert machine.systemctl_show(UNIT, "MainPID")["MainPID"] != shown["MainPID"]
        assert health(port) == 200
        assert cli("plan", "--file", fleet).code == 0
    finally:
        subprocess.run(["ssh", "-F", str(login.config), "-o", f"ControlPath={control}/%C",
                        "-O", "exit", login.alias], capture_output=True, timeout=10)  # fmt: skip
        machine.enter("systemctl", "stop", UNIT, check=False)
        shutil.rmtree(control, ignore_errors=True)


def test_stop_hold_start_and_logs_of_a_user_unit(
    box: tuple[Machine, Path, SshLogin],  # noqa: F811
    fake_runtime: Path,
    tiny_model: dict[str, Any],
) -> None:
    """The user scope: root's own systemd user manager (linger on, L-38) in the container,
    every verb run there as the host runs it (``--host``), ``systemctl --user`` and
    ``journalctl --user`` without sudo."""
    machine, shared, _login = box
    # The minimal rootfs has no pam_systemd to give the user manager its runtime dir.
    drop_in = "/etc/systemd/system/user@0.service.d"
    machine.enter("mkdir", "-p", "/var/lib/systemd/linger", drop_in)
    machine.enter("touch", "/var/lib/systemd/linger/root")
    machine.enter("sh", "-c", "printf '[Service]\\nEnvironment=XDG_RUNTIME_DIR=/run/user/0\\n' "
                  f"> {drop_in}/runtime-dir.conf")  # fmt: skip
    machine.enter("systemctl", "daemon-reload")
    machine.enter("systemctl", "start", "user-runtime-dir@0.service", "user@0.service")
    folder = shared / "user-fleet"
    runtime = shared / "user-llama-server"
    runtime.write_text(fake_runtime.read_text())
    runtime.chmod(0o755)
    model = shared / "user-tiny"
    model.mkdir()
    shutil.copyfile(Path(tiny_model["source"]["path"]) / "tiny.gguf", model / "tiny.gguf")
    port = free_port()
    data = {
        "version": 1,
        "hosts": {"sd": {"address": "127.0.0.1", "linger": True,
                         "checkout": str(folder / "hosts" / "sd" / "fleet"),
                         "state_dir": str(folder / "hosts" / "sd" / "state")}},
        "runtimes": {"fake": {"kind": "llama.cpp", "binary": str(runtime)}},
        "models": {"tiny": {**tiny_model, "source": {"path": str(model)}}},
        "services": {"web": {"host": "sd", "runtime": "fake", "model": "tiny", "port": port,
                             "ctx_per_slot": 512, "backend": "systemd",
                             "unit": {"scope": "user"}, "health": {"timeout": "20s"}}},
    }  # fmt: skip
    repo = FleetRepo.create(folder, data, hosts=["sd"])
    fleet = str(repo.checkouts["sd"] / "fleet.yaml")
    env = ["env", "-i", "HOME=/root", "XDG_RUNTIME_DIR=/run/user/0",
           "PATH=/usr/sbin:/usr/bin:/sbin:/bin", f"PYTHONPATH={ROOT / 'src'}"]  # fmt: skip

    def there(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["nsenter", "-t", str(machine.leader), "-a", *env, sys.executable, str(ENTRY),
             *args, "--file", fleet, "--host", "sd"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    def user_unit(*props: str) -> str:
        return machine.enter(*env, "systemctl", "--user", "show", UNIT, "-p", ",".join(props))

    try:
        applied = there("apply")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "ActiveState=active" in user_unit("ActiveState")
        assert health(port) == 200

        logs = there("logs", "web", "-n", "20")
        assert logs.returncode == 0, logs.stderr
        assert f"fake llama-server listening on 127.0.0.1:{port}" in logs.stdout

        held = there("stop", "web", "--hold", "user maintenance")
        assert held.returncode == 0, held.stdout + held.stderr
        shown = user_unit("ActiveState", "UnitFileState")
        assert "ActiveState=inactive" in shown and "UnitFileState=disabled" in shown
        assert health(port) is None
        again = there("apply")
        assert again.returncode == 0 and "web: held: user maintenance" in again.stdout
        assert health(port) is None

        started = there("start", "web")
        assert started.returncode == 0, started.stdout + started.stderr
        shown = user_unit("ActiveState", "UnitFileState")
        assert "ActiveState=active" in shown and "UnitFileState=enabled" in shown
        assert health(port) == 200
    finally:
        machine.enter(*env, "systemctl", "--user", "stop", UNIT, check=False)
