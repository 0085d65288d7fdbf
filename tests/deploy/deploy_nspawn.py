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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE = Path.home() / ".cache" / "inferfleet-test"
SUITE = "bookworm"
# systemd to boot; git for the checkout's revision; the shared libraries the
# bind-mounted Python (ssl, ctypes) and llama-server (OpenMP, C++) load.
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "git",
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


def rootfs() -> Path:
    """The cached root filesystem, built on first use (atomically: build, then rename)."""
    key = hashlib.sha256(",".join(PACKAGES).encode()).hexdigest()[:10]
    target = CACHE / f"rootfs-{SUITE}-{key}"
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
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(work),
                debian_mirror(),
            ],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=1200,
        )
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
def booted(name: str, binds: list[tuple[str, str, bool]], log: Path) -> Iterator[Machine]:
    """Boot the cached rootfs; ``binds`` are (host path, container path, read-only)."""
    root = rootfs()
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
    handle = log.open("wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT)
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
