"""Crash consistency: a deploy to two test hosts killed with SIGKILL at 20 points converges.

What a kill is here: at the chosen instant every process of the deploy is
stopped (SIGSTOP) and then killed (SIGKILL), on both sides at once:

* the operator's side: the ``inferfleet deploy`` process group, every
  descendant of it (ssh clients, git push), and the ssh ControlMaster it
  left in the background (found by its private ControlPath) -- what a crashed
  laptop or a lost terminal takes down;
* each host's side: every process in the host's network namespace that is
  neither an sshd nor a server (the ``sh -c`` the remote command runs in,
  ``inferfleet apply``, a ``git pull`` it runs), killed by pid.

Killing the operator alone would not reproduce a crash on the host: the
remote apply runs without a terminal, so sshd sends it no SIGHUP and it runs
on (and finishes) after its connection is gone (test_deploy_faults covers
that case). A host-side crash of the apply (the OOM killer, an admin's
``kill -9``, the operator's crash while a write is half done) is the one
that can leave a torn write, a lock, a started server without a record or a
marker behind its process; so both sides die at the same instant. Servers
already started are left running, as they would after such a crash (they run
in their own session): the next deploy must find them by their records.

The instants are fixed, not random: a change deploy is timed once (until
the hosts' first output, and in all); points 1-4 step evenly through the
operator's part (push, ssh connect, pull) and points 5-20 through the hosts'
work, so they spread over the pull, plan, gates, settings write and its
archive, stop, start, health wait, contract probe, marker write and the no-op
memo written at the end (each point prints where each host was). Each round
commits a new revision that restarts every service on both hosts (so the kill
lands inside real work), then a plain ``deploy`` must converge: exit 0, every
service healthy at that revision, exactly one server process per service in
each host's namespace (the recorded one), no other process left there, every
state file parses, the host lock free and the plan has nothing left to do.

The tests after it hold the crashes it found, or that its points hit too
rarely to rely on, one at a time: a killed ssh master's socket, an apply
killed between starting a server and recording it, the locks of a git killed
mid-pull, and a lock a killed push left in the remote.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from deploy_hosts import Lab
from deploy_repo import FleetRepo

from inferfleet.deploy.apply import lock_for
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.ssh import SshConnector, Target

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.needs_root]
HERE = Path(__file__).resolve().parent
ENTRY = HERE / "inferfleet_entry.py"
POINTS = 20
SERVER_SCRIPT = "fake_llama_server.py"
SERVICES = {"a": ("h1", 8080), "b": ("h1", 8081), "c": ("h2", 8080), "d": ("h2", 8081)}
SETTINGS = ("a", "c")  # one settings file per host: each change archives the one it replaces
LOADING = "0.3"  # seconds each server answers 503 "Loading model": a real health wait
DEPLOY_TIMEOUT = 120.0
WINDOW_TRIES = 3  # tries to land the freeze between a start and its record


class NotConverged(AssertionError):
    pass


def cmdline(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(proc.cmdline())
    return ""


def status(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return str(proc.status())
    return "gone"


def start_deploy(repo: FleetRepo, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(
        [sys.executable, str(ENTRY), "deploy", "h1", "h2", "-y", "--file", str(repo.fleet_file)],
        env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},  # its last line says where it was
        stdin=subprocess.DEVNULL,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def host_side(lab: Lab) -> list[psutil.Process]:
    """Every process in the hosts' namespaces that is neither an sshd nor a server."""
    found = []
    for host in lab.hosts.values():
        for pid in host.pids():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.name().startswith("sshd") or SERVER_SCRIPT in cmdline(proc):
                    continue
                found.append(proc)
    return found


def operator_side(deployer: subprocess.Popen[bytes], control: str) -> list[psutil.Process]:
    """The deploy, its descendants, and any ssh master with our private ControlPath."""
    found: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(deployer.pid)
        found = [root, *root.children(recursive=True)]
    for proc in psutil.process_iter():
        if proc.pid != os.getpid() and control in cmdline(proc) and proc not in found:
            found.append(proc)
    return found


def crash(deployer: subprocess.Popen[bytes], lab: Lab, control: str) -> int:
    """Freeze both sides, then SIGKILL them by pid; returns how many processes died."""
    victims = operator_side(deployer, control) + host_side(lab)
    for proc in victims:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGSTOP)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(deployer.pid, signal.SIGKILL)
    for proc in victims:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    deployer.wait(10)
    _gone, alive = psutil.wait_procs(victims, timeout=10)
    assert not [p for p in alive if status(p) not in (psutil.STATUS_ZOMBIE, "gone")], alive
    return len(victims)


def servers_in(lab: Lab, host: str) -> dict[int, list[int]]:
    """port -> pids of fake servers in the host's namespace."""
    found: dict[int, list[int]] = {}
    for pid in lab.hosts[host].pids():
        with contextlib.suppress(psutil.Error):
            argv = psutil.Process(pid).cmdline()
            if any(SERVER_SCRIPT in part for part in argv) and "--port" in argv:
                found.setdefault(int(argv[argv.index("--port") + 1]), []).append(pid)
    return found


def torn_files(folder: Path) -> list[str]:
    """Every JSON state file under ``folder`` that does not parse."""
    bad = []
    for path in sorted(folder.rglob("*.json")):
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            bad.append(f"{path}: {exc}")
    return bad


def kill_delays(remote_from: float, duration: float) -> list[float]:
    """The 20 kill instants: the first few step through the operator's part (push,
    ssh connect, pull), the rest through the hosts' work (plan, gates, settings,
    archive, stop, start, health wait, contract probe, marker, no-op memo)."""
    early = POINTS // 5
    late = POINTS - early
    first = [k * remote_from / (early + 1) for k in range(1, early + 1)]
    rest = [remote_from + k * (duration - remote_from) / (late + 1) for k in range(1, late + 1)]
    return first + rest


def last_steps(log: Path) -> str:
    """Where each host was when the deploy died (its last output line)."""
    lines = log.read_text(errors="replace").splitlines()
    seen = {}
    for line in lines:
        host, _, rest = line.partition(" ")
        if host in ("h1", "h2"):
            seen[host] = rest[:60]
    return "; ".join(f"{h}: {s}" for h, s in sorted(seen.items())) or "(before any host output)"


def check_converged(
    repo: FleetRepo,
    lab: Lab,
    env: dict[str, str],
    target: str,
    log: Path,
    changed: tuple[str, ...] = tuple(SERVICES),
) -> list[str]:
    """A plain deploy, then what is wrong with the fleet (empty when it converged);
    the ``changed`` services' markers must be at ``target``."""
    deployer = start_deploy(repo, env, log)
    try:
        code = deployer.wait(DEPLOY_TIMEOUT)
    except subprocess.TimeoutExpired:
        return [f"the recovery deploy did not end within {DEPLOY_TIMEOUT:.0f} s"]
    finally:
        if deployer.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(deployer.pid, signal.SIGKILL)
            deployer.wait(10)
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        return [f"the recovery deploy exited {code}:\n{tail}"]
    wrong: list[str] = []
    plan = subprocess.run(
        [sys.executable, str(ENTRY), "plan", "--file", str(repo.fleet_file), "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    try:
        doc = json.loads(plan.stdout)
        left = [
            f"{h['host']}/{i['service']}: {i['action']}"
            for h in doc["hosts"]
            for i in h["items"]
            if i["action"] != "keep"
        ]
    except (ValueError, KeyError, TypeError):
        left = [f"plan --json exited {plan.returncode}: {plan.stderr.strip()[-300:]}"]
    wrong += [f"the plan still has work: {item}" for item in left]
    for host in ("h1", "h2"):
        lock = lock_for(Repo.containing(repo.checkouts[host]), host)
        if lock.holder() is not None:
            wrong.append(f"{host}: the host lock is held by {lock.holder()}")
        wrong += [f"{host}: torn state file {t}" for t in torn_files(repo.states[host])]
        git_dir = repo.checkouts[host] / ".git"
        wrong += [f"{host}: torn file {t}" for t in torn_files(git_dir) if "inferfleet" in t]
        servers = servers_in(lab, host)
        recorded = set()
        for name, (where, port) in SERVICES.items():
            if where != host:
                continue
            marker, record = repo.marker(host, name), repo.record(host, name)
            if marker is None or (name in changed and marker["revision"] != target):
                got = None if marker is None else marker["revision"][:12]
                wrong.append(f"{name}: marker at {got}, not at {target[:12]}")
            if name in SETTINGS:
                rendered = (log.parent / f"{name}.yml").read_text()
                wanted = (repo.operator / "settings" / f"{name}.yml").read_text()
                if rendered != wanted:
                    wrong.append(f"{name}: its settings file holds {rendered!r}, not {wanted!r}")
            if record is None:
                wrong.append(f"{name}: no service record")
                continue
            recorded.add(record["pid"])
            if servers.get(port, []) != [record["pid"]]:
                wrong.append(
                    f"{name}: servers on port {port} are {servers.get(port, [])}, "
                    f"not the recorded pid {record['pid']} alone"
                )
            try:
                url = f"http://{lab.hosts[host].address}:{port}/health"
                if httpx.get(url, timeout=5).status_code != 200:
                    wrong.append(f"{name}: /health is not 200")
            except httpx.TransportError as exc:
                wrong.append(f"{name}: /health does not answer ({exc})")
        strays = [p for port_pids in servers.values() for p in port_pids if p not in recorded]
        wrong += [f"{host}: orphan server pid {p}" for p in strays]
        # sshd sessions of a finished command may take a moment to go.
        deadline = time.monotonic() + 5
        while (left := host_side(lab)) and time.monotonic() < deadline:
            time.sleep(0.1)
        wrong += [f"{host}: orphan process {p.pid} ({cmdline(p)})" for p in left]
    return wrong


def chaos_fleet(fleet: Any, tmp_path: Path) -> FleetRepo:
    """Two services per host, a settings file on one of each (rendered into ``tmp_path``)."""
    services: dict[str, dict[str, Any]] = {
        name: {"host": host, "port": port, "extra_args": ["--x-loading", LOADING]}
        for name, (host, port) in SERVICES.items()
    }
    for name in SETTINGS:
        services[name]["settings"] = [
            {"template": f"settings/{name}.yml", "dest": str(tmp_path / f"{name}.yml"), "allow": []}
        ]
    repo: FleetRepo = fleet(services)
    repo.commit("settings", {f"settings/{name}.yml": "round: first\n" for name in SETTINGS})
    return repo


def test_a_deploy_killed_at_20_points_converges_every_time(
    fleet, lab: Lab, deploy_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = chaos_fleet(fleet, tmp_path)
    env = dict(deploy_env)
    control = env["INFERFLEET_SSH_CONTROL_DIR"]
    started = time.monotonic()
    try:
        first = check_converged(repo, lab, env, repo.head(), tmp_path / "first.log")
        assert not first, "the first deploy did not converge:\n" + "\n".join(first)

        def change(round_: int) -> str:
            for name in SERVICES:
                repo.data["services"][name]["env"] = {"CHAOS_ROUND": str(round_)}
            files = {f"settings/{name}.yml": f"round: {round_}\n" for name in SETTINGS}
            return repo.commit(f"round {round_}: restart every service", files)

        # One change deploy, timed: until the hosts' first output (push, connect, pull)
        # and in all; the kill points step through both parts.
        change(0)
        timed_log = tmp_path / "timed.log"
        clock = time.monotonic()
        timed = start_deploy(repo, env, timed_log)
        remote_from = 0.0
        while timed.poll() is None and time.monotonic() - clock < DEPLOY_TIMEOUT:
            if not remote_from and timed_log.stat().st_size:
                remote_from = time.monotonic() - clock
            time.sleep(0.005)
        assert timed.wait(10) == 0, timed_log.read_text()
        duration = time.monotonic() - clock
        delays = kill_delays(remote_from or duration / 2, duration)

        survived = 0
        for point in range(1, POINTS + 1):
            target = change(point)
            delay = delays[point - 1]
            log = tmp_path / f"kill-{point}.log"
            deployer = start_deploy(repo, env, log)
            time.sleep(delay)
            killed = crash(deployer, lab, control)
            where = last_steps(log)
            wrong = check_converged(repo, lab, env, target, tmp_path / f"recover-{point}.log")
            if wrong:
                with capsys.disabled():
                    print(f"\nchaos: {survived}/{POINTS} kill points converged")
                pytest.fail(
                    f"kill point {point} (after {delay:.2f} s of a {duration:.2f} s deploy, "
                    f"{killed} processes killed, last output: {where}) did not converge:\n"
                    + "\n".join(wrong)
                )
            survived += 1
            with capsys.disabled():
                print(f"\nchaos point {point:2d} at {delay:5.2f}s ({killed} killed): {where}")
        with capsys.disabled():
            print(
                f"\nchaos: {survived}/{POINTS} kill points converged "
                f"(deploy {duration:.1f} s, test {time.monotonic() - started:.0f} s)"
            )
        assert survived == POINTS
    finally:
        # Whatever the rounds left is stopped by pid (deploy_env's teardown also sweeps
        # the hosts' namespaces).
        for proc in psutil.process_iter():
            if proc.pid != os.getpid() and control in cmdline(proc):
                with contextlib.suppress(psutil.Error):
                    proc.kill()


def test_a_master_killed_with_sigkill_leaves_a_socket_the_next_connect_replaces(
    lab: Lab, deploy_env: dict[str, str]
) -> None:
    """The crash this test found first: ssh will not replace an existing control
    socket under ``ControlMaster=yes`` and, with ``-N``, never returns; every deploy
    after a killed master hung until its 20 s timeout and failed."""
    control = deploy_env["INFERFLEET_SSH_CONTROL_DIR"]
    target = Target("h1", lab.hosts["h1"].address)
    first = SshConnector(target)
    assert first.run("echo up").stdout.strip() == "up"
    [master] = [p for p in psutil.process_iter() if control in cmdline(p) and "-N" in cmdline(p)]
    master.kill()
    master.wait(10)
    [stale] = list(Path(control).iterdir())  # the dead master's socket stays behind
    clock = time.monotonic()
    again = SshConnector(target)
    assert again.run("echo again").stdout.strip() == "again"
    assert time.monotonic() - clock < 10
    assert stale.is_socket()  # the new master's, on the same path
    again.close()


def test_an_apply_killed_between_starting_a_server_and_recording_it_converges(
    fleet, lab: Lab, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    """The narrowest window of a start: the server runs, its record is not written yet.

    A runtime that freezes its parent (the apply) once, right after it was
    started, holds the apply inside that window; then both sides are killed.
    The server left behind was started by inferfleet for that service, so the
    next deploy must stop it and start the service, not refuse its port as a
    stranger's forever.
    """
    repo = chaos_fleet(fleet, tmp_path)
    env = dict(deploy_env)
    first = check_converged(repo, lab, env, repo.head(), tmp_path / "first.log")
    assert not first, "\n".join(first)
    server = HERE / SERVER_SCRIPT
    repo.data["runtimes"]["freezer"] = {"kind": "llama.cpp", "binary": ""}
    repo.data["services"]["a"]["runtime"] = "freezer"
    # The freeze races the apply's next step: a parent that writes the record before
    # its child's shell runs its first line wins. That crash must converge as well;
    # the window is then tried again, with a new freezer (a new runtime: a new spec).
    for attempt in range(1, WINDOW_TRIES + 1):
        flag = tmp_path / f"froze-once-{attempt}"
        freezer = tmp_path / f"freezer-{attempt}"
        freezer.write_text(
            # dash's builtins only before the stop: it must land before the record's write
            f'#!/bin/sh\nif [ ! -e {flag} ]; then kill -STOP "$PPID"; : > {flag}; fi\n'
            f'exec {sys.executable} {server} "$@"\n'
        )
        freezer.chmod(0o755)
        repo.data["runtimes"]["freezer"]["binary"] = str(freezer)
        target = repo.commit(f"a: another runtime ({attempt})")
        deployer = start_deploy(repo, env, tmp_path / f"frozen-{attempt}.log")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and deployer.poll() is None:
                frozen = [p for p in host_side(lab) if status(p) == psutil.STATUS_STOPPED]
                if frozen:
                    break
                time.sleep(0.02)
            assert frozen, "the apply never started the freezing runtime"
            crash(deployer, lab, env["INFERFLEET_SSH_CONTROL_DIR"])
        finally:
            if deployer.poll() is None:
                os.killpg(deployer.pid, signal.SIGKILL)
                deployer.wait(10)
        assert flag.exists()
        orphans = servers_in(lab, "h1").get(8080, [])
        assert len(orphans) == 1, orphans  # the server the killed apply started
        record = repo.record("h1", "a")
        inside = record is None or record["pid"] != orphans[0]  # no record names it
        log = tmp_path / f"recover-{attempt}.log"
        wrong = check_converged(repo, lab, env, target, log, changed=("a",))
        assert not wrong, "\n".join(wrong)
        if inside:
            return
    pytest.fail(f"the freeze landed after the record's write in all {WINDOW_TRIES} tries")


def test_the_locks_of_a_git_killed_mid_pull_are_removed_unless_a_git_works_there(
    fleet, lab: Lab, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    """A ``git pull`` killed while it held its locks leaves them behind (the files
    below are the ones git creates; the kill itself lands there rarely): git then
    refuses every later pull, so a host would never be deployed again. Under the
    host lock they are removed, but never while a git process works in the checkout."""
    repo = chaos_fleet(fleet, tmp_path)
    env = dict(deploy_env)
    first = check_converged(repo, lab, env, repo.head(), tmp_path / "first.log")
    assert not first, "\n".join(first)
    for name in SERVICES:
        repo.data["services"][name]["env"] = {"AFTER": "a killed pull"}
    target = repo.commit("after a killed pull")
    h1_git, h2_git = repo.checkouts["h1"] / ".git", repo.checkouts["h2"] / ".git"
    planted = [
        h1_git / "index.lock",
        h2_git / "ORIG_HEAD.lock",
        h2_git / "refs" / "remotes" / "origin" / "main.lock",
    ]
    for path in planted:
        path.write_text("")

    # A git at work in h1's checkout (an alias that sleeps): its locks are its own.
    working = subprocess.Popen(
        ["git", "-c", "alias.wait=!sleep 60", "wait"],
        cwd=repo.checkouts["h1"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            c.name() == "sleep" for c in psutil.Process(working.pid).children(recursive=True)
        ):
            time.sleep(0.02)
        wrong = check_converged(repo, lab, env, target, tmp_path / "busy.log")
        assert wrong and "index.lock': File exists" in wrong[0], wrong
        assert "if no git runs there, remove that file" in wrong[0]
        assert planted[0].exists()  # left to the git that works there
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(working.pid, signal.SIGKILL)
        working.wait(10)
    wrong = check_converged(repo, lab, env, target, tmp_path / "recover.log")
    assert not wrong, "\n".join(wrong)
    assert not any(path.exists() for path in planted)


def test_a_lock_a_killed_push_left_in_the_remote_is_named_with_its_fix(
    fleet, lab: Lab, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    """The remote is another machine's repository (a git server): inferfleet never
    removes its files, but says which lock stops the push and how to clear it."""
    repo = chaos_fleet(fleet, tmp_path)
    env = dict(deploy_env)
    for name in SERVICES:
        repo.data["services"][name]["env"] = {"AFTER": "a killed push"}
    target = repo.commit("after a killed push")
    lock = repo.remote / "refs" / "heads" / "main.lock"
    lock.write_text("")  # what a receive-pack killed mid-push leaves
    wrong = check_converged(repo, lab, env, target, tmp_path / "locked.log")
    text = " ".join(" ".join(wrong).split())
    assert f"git push failed: the remote repository is locked ({lock} exists)" in text, wrong
    assert "remove that file and deploy again" in text
    assert repo.marker("h1", "a") is None  # nothing was deployed
    lock.unlink()
    wrong = check_converged(repo, lab, env, target, tmp_path / "recover.log")
    assert not wrong, "\n".join(wrong)
