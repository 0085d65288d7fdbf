"""A real systemd for backend tests: a debootstrap'd root filesystem booted with systemd-nspawn.

The root filesystem is built once and cached under ``~/.cache/inferfleet-test``
(about a minute and 300 MB); each test boots it with ``--volatile=overlay`` so
nothing a test does survives it. There is no D-Bus on the machine that runs
the tests, so ``machinectl`` cannot reach the container: ``--keep-unit`` keeps
nspawn out of the host's systemd and we enter the container with ``nsenter``.

The Debian mirror comes from this machine's own apt sources, read at run
time; nothing here names a registry host.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers import free_port

CACHE = Path.home() / ".cache" / "inferfleet-test"
ROOT = Path(__file__).resolve().parents[2]  # this checkout
SUITE = "bookworm"
# systemd to boot; git for the checkout's revision; sudo and an sshd for a
# non-root ssh user with `become: sudo`; the shared libraries the
# bind-mounted Python (ssl, ctypes) and llama-server (OpenMP, C++) load.
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "git",
    "sudo",
    "openssh-server",
    "libssl3",
    "libffi8",
    "libgomp1",
    "libstdc++6",
    "libbz2-1.0",
    "liblzma5",
    "zlib1g",
)


def debian_mirror() -> str:
    """The Debian archive URI this machine's apt uses for the main suite."""
    found: list[tuple[str, list[str]]] = []
    sources = Path("/etc/apt")
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for block in re.split(r"\n\s*\n", text):
                fields = dict(
                    (k.strip().lower(), v.strip())
                    for k, _, v in (ln.partition(":") for ln in block.splitlines())
                    if not k.startswith("#") and v
                )
                enabled = fields.get("enabled", "yes").lower() != "no"
                if enabled and "deb" in fields.get("types", "").split():
                    for uri in fields.get("uris", "").split():
                        found.append((uri, fields.get("suites", "").split()))
        elif path.suffix == ".list":
            for line in text.splitlines():
                parts = line.split("#", 1)[0].split()
                if len(parts) >= 3 and parts[0] == "deb":
                    words = [p for p in parts[1:] if not p.startswith("[")]
                    if len(words) >= 2:
                        found.append((words[0], [words[1]]))
    for uri, suites in found:
        if SUITE in suites and "security" not in uri:
            return uri
    raise RuntimeError(
        f"no apt source for Debian {SUITE} in /etc/apt: the nspawn tests need a Debian mirror"
    )


def rootfs(
    suite: str = SUITE,
    packages: tuple[str, ...] = PACKAGES,
    files: Mapping[str, str] | None = None,
) -> Path:
    """The cached root filesystem, built on first use (atomically: build, then rename).

    ``files`` (path in the rootfs -> text) are written after debootstrap; they are part
    of the cache key, like the suite and the packages."""
    files = dict(files or {})
    parts = [",".join(packages), *(f"{k}={v}" for k, v in sorted(files.items()))]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:10]
    target = CACHE / f"rootfs-{suite}-{key}"
    if (target / "usr" / "lib" / "systemd" / "systemd").exists():
        return target
    for tool in ("debootstrap", "systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is missing: apt-get install debootstrap systemd-container")
    CACHE.mkdir(parents=True, exist_ok=True)
    work = CACHE / f".building-{target.name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(packages)}",
                suite,
                str(work),
                # This machine's archive, which serves every suite.
                debian_mirror(),
            ],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=1200,
        )
        # The container shares this machine's network: its own sshd must not take
        # port 22 at boot (a test starts one on a port of its own, deploy_nspawn.sshd).
        for unit in ("ssh.service", "ssh.socket"):
            masked = work / "etc" / "systemd" / "system" / unit
            masked.unlink(missing_ok=True)
            masked.symlink_to("/dev/null")
        for name, text in files.items():
            path = work / name.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        os.replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


@dataclass
class Machine:
    """A booted container: its name, the nspawn process and the container's init (leader)."""

    name: str
    nspawn: subprocess.Popen[bytes]
    leader: int
    log: Path

    def enter(self, *argv: str, timeout: float = 60.0, check: bool = True) -> str:
        """Run argv inside every namespace of the container; returns stdout."""
        done = subprocess.run(
            ["nsenter", "-t", str(self.leader), "-a", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} in {self.name} exited {done.returncode}: "
                f"{done.stderr.strip()} {done.stdout.strip()}"
            )
        return done.stdout

    def systemctl_show(self, unit: str, *props: str) -> dict[str, str]:
        text = self.enter("systemctl", "show", unit, "-p", ",".join(props))
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@contextlib.contextmanager
def booted(
    name: str,
    binds: list[tuple[str, str, bool]],
    log: Path,
    *,
    root: Path | None = None,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[Machine]:
    """Boot the cached rootfs (or ``root``); ``binds`` are (host path, container path,
    read-only); ``options`` more systemd-nspawn options, ``env`` its environment."""
    root = rootfs() if root is None else root
    argv = [
        "systemd-nspawn",
        "-q",
        "-b",
        "-D",
        str(root),
        "--register=no",
        "--keep-unit",
        "-M",
        name,
        "--volatile=overlay",
        "--console=passive",
    ]
    for host_path, inside, read_only in binds:
        argv.append(f"--bind{'-ro' if read_only else ''}={host_path}:{inside}")
    argv += options
    handle = log.open("wb")
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=handle,
        stderr=subprocess.STDOUT,
        env=None if env is None else {**os.environ, **env},
    )
    machine: Machine | None = None
    try:
        leader = _wait_leader(proc, log)
        machine = Machine(name, proc, leader, log)
        _wait_running(machine)
        yield machine
    finally:
        # Stop by the pid we started: SIGTERM asks nspawn to shut the container down.
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        handle.close()


def _wait_leader(proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> int:
    """The container's PID 1 as seen from here: the child of nspawn that runs systemd."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"systemd-nspawn exited: {log.read_text(errors='replace')}")
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        with contextlib.suppress(OSError):
            for pid in children.read_text().split():
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                if comm == "systemd":
                    return int(pid)
        time.sleep(0.05)
    raise AssertionError(f"the container's systemd did not start: {log.read_text()}")


def _wait_running(machine: Machine, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["nsenter", "-t", str(machine.leader), "-a", "systemctl", "is-system-running"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        state = done.stdout.strip()
        if state in {"running", "degraded"}:
            return
        time.sleep(0.1)
    raise AssertionError(f"container {machine.name} did not boot (state {state!r})")


@dataclass
class SshLogin:
    """A non-root user of a booted container, reachable over ssh as ``alias``."""

    user: str
    uid: int
    alias: str
    config: Path  # the ssh client config that names the alias


def ssh_login(machine: Machine, folder: Path, *, port: int, user: str = "ops") -> SshLogin:
    """A user ``user`` in the container with a sudoers entry (inferfleet's own line, so
    the hint a BecomeError gives is what is tested), and an sshd of the container's on
    127.0.0.1:``port`` (the container shares this machine's network). ``folder`` is
    bind-mounted at the same path in the container; keys and configs live there."""
    from inferfleet.io.become import sudoers_line

    folder.mkdir(parents=True, exist_ok=True)
    client, host_key = folder / "id_ed25519", folder / "ssh_host_ed25519_key"
    for key in (client, host_key):
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                           check=True, capture_output=True)  # fmt: skip
    (folder / "authorized_keys").write_text(client.with_suffix(".pub").read_text())
    # useradd leaves the password locked ("!"), which sshd without PAM refuses even for a
    # key: "*" is no password, and not locked.
    machine.enter("useradd", "--create-home", "--shell", "/bin/sh", user)
    machine.enter("usermod", "-p", "*", user)
    uid = int(machine.enter("id", "-u", user).strip())
    drop_in = folder / "sudoers"
    drop_in.write_text(sudoers_line(user) + "\n")
    machine.enter("visudo", "-cf", str(drop_in))
    machine.enter("install", "-m", "440", str(drop_in), "/etc/sudoers.d/inferfleet")
    config = folder / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {host_key}\n"
        f"PidFile {folder / 'sshd.pid'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
        f"AllowUsers {user}\nPermitRootLogin no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPrintMotd no\n"
        "UseDNS no\nMaxSessions 32\nMaxStartups 32\n"
    )
    machine.enter("mkdir", "-p", "/run/sshd")
    # Detached inside the container: its init adopts it, and the container's shutdown
    # stops it with everything else.
    machine.enter("/usr/sbin/sshd", "-f", str(config), "-E", str(folder / "sshd.log"))
    public = host_key.with_suffix(".pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {public[0]} {public[1]}\n")
    alias = f"{machine.name}-ssh"
    client_config = folder / "ssh_config"
    client_config.write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n"
        f"  IdentityFile {client}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {folder / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n"
    )
    deadline = time.monotonic() + 15
    while True:
        done = subprocess.run(["ssh", "-F", str(client_config), alias, "id", "-un"],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        if done.returncode == 0 and done.stdout.strip() == user:
            break
        if time.monotonic() > deadline:
            log = (
                (folder / "sshd.log").read_text(errors="replace")
                if (folder / "sshd.log").exists()
                else ""
            )
            raise AssertionError(f"ssh {alias} failed: {done.stderr.strip()} {log}")
        time.sleep(0.1)
    return SshLogin(user, uid, alias, client_config)


# A host that runs Quadlet containers: Debian 13 (podman 5.4: Quadlet, and
# `Notify=healthy`, which the rendered .container files use; Debian 12's 4.3 has
# neither), the same tools as above, iproute2 for `ss` (the gate names a rootful
# container's socket with `sudo ss`), uidmap for rootless podman.
PODMAN_SUITE = "trixie"
PODMAN_PACKAGES = tuple("libssl3t64" if p == "libssl3" else p for p in PACKAGES) + (
    "podman",
    "crun",
    "iproute2",
    "uidmap",  # newuidmap/newgidmap: rootless podman
)
PODMAN_FILES = {
    # Under nspawn on this machine's hybrid cgroups the container gets a cgroup2 tree
    # with no controllers delegated: podman's default pids limit cannot be set.
    "/etc/containers/containers.conf": "[containers]\npids_limit = 0\n",
}
# What podman needs from nspawn here: cgroup2 inside (a v1 controller is mounted read-only),
# the keyring syscalls (crun gives each container a session keyring) and bpf with
# CAP_BPF (crun's cgroup2 device filter is a BPF program), both refused by default.
# (No CAP_SYS_RESOURCE: this machine's root lacks it, so no container here may raise
# its memlock limit; the rendered units ask for that only for GPUs or --mlock.)
PODMAN_ENV = {"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"}
PODMAN_OPTIONS = ("--system-call-filter=add_key keyctl request_key bpf", "--capability=CAP_BPF")
CONTAINERS_STORAGE = "/var/lib/containers/storage"


def podman_rootfs() -> Path:
    """The Quadlet host's root filesystem (cached like :func:`rootfs`)."""
    return rootfs(PODMAN_SUITE, PODMAN_PACKAGES, PODMAN_FILES)


@contextlib.contextmanager
def booted_podman_host(
    name: str, binds: list[tuple[str, str, bool]], log: Path
) -> Iterator[Machine]:
    """Boot the Quadlet host. Its podman storage is a folder of the cache, kept across
    boots (the volatile overlay cannot hold podman's overlay storage, and an imported
    image then survives), one per root filesystem."""
    root = podman_rootfs()
    storage = CACHE / f"podman-storage-{root.name}"
    storage.mkdir(parents=True, exist_ok=True)
    binds = [*binds, (str(storage), CONTAINERS_STORAGE, False)]
    with booted(name, binds, log, root=root, options=PODMAN_OPTIONS, env=PODMAN_ENV) as machine:
        yield machine


Boot = Callable[
    [str, list[tuple[str, str, bool]], Path], contextlib.AbstractContextManager[Machine]
]


@contextlib.contextmanager
def sudo_host(
    shared: Path,
    prefix: str,
    *,
    binds: Sequence[tuple[str, str, bool]] = (),
    boot: Boot = booted,
) -> Iterator[tuple[Machine, SshLogin]]:
    """A booted host (``boot``) that runs this checkout, its interpreter and venv (bound
    read-only at the same paths) and ``shared`` (read-write, readable by all), with the
    ssh user ``ops`` of :func:`ssh_login` (inferfleet's sudoers line): what a
    ``become: sudo`` deploy reaches. ``prefix`` starts the machine's name."""
    shared.chmod(0o755)  # ops reads the repositories, runtime and model kept here
    for parent in shared.parents:  # pytest's base folders are root's 0700
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o011)
    interpreter = str(Path(sys.executable).resolve().parents[1])
    all_binds = [(str(ROOT), str(ROOT), True), (interpreter, interpreter, True),
                 (str(shared), str(shared), False), *binds]  # fmt: skip
    if not Path(sys.prefix).is_relative_to(ROOT):  # a venv outside the checkout (a worktree)
        all_binds.append((sys.prefix, sys.prefix, True))
    with boot(f"{prefix}{free_port() % 100000}", all_binds, shared / "nspawn.log") as machine:
        # This interpreter lives under /root (a pyenv): ops may pass through, not list.
        machine.enter("chmod", "711", "/root")
        machine.enter("git", "config", "--system", "safe.directory", "*")
        yield machine, ssh_login(machine, shared / "ssh", port=free_port())
