"""A real OpenSSH server on a free loopback port, for reading a "remote" host's facts over ssh.

Its own host key, client key and config live in a tmp folder; the client
reaches it through an ssh config (``INFERFLEET_SSH_CONFIG``) that maps the
fleet's host address onto 127.0.0.1 and this port, exactly as a user's
``~/.ssh/config`` would map an alias. Stopped by its pid.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from inferfleet.io import process

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class Sshd:
    port: int
    client_config: Path


def _listening(address: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, port)) == 0


@contextlib.contextmanager
def loopback_sshd(folder: Path, port: int, aliases: dict[str, str]) -> Iterator[Sshd]:
    """sshd on ``port`` of each loopback address in ``aliases`` (ssh alias -> 127.x.y.z).

    Give each alias its own address: the connector's master sockets are named
    after the resolved destination, so two aliases of one address would share one.
    """
    if shutil.which(SSHD) is None:
        pytest.fail(f"{SSHD} is missing: apt-get install openssh-server")
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    for key in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)],
            check=True,
            timeout=30,
        )
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    config = folder / "sshd_config"
    listen = "".join(f"ListenAddress {address}\n" for address in sorted(set(aliases.values())))
    config.write_text(
        f"Port {port}\n{listen}HostKey {folder / 'host_key'}\n"
        f"PidFile {folder / 'sshd.pid'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    client = folder / "ssh_config"
    client.write_text(
        "".join(
            f"Host {alias}\n  HostName {address}\n  Port {port}\n  User root\n"
            f"  IdentityFile {folder / 'client_key'}\n  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
            for alias, address in aliases.items()
        )
    )
    proc = process.spawn_detached([SSHD, "-D", "-e", "-f", str(config)], log_path=folder / "log")
    try:
        deadline = time.monotonic() + 15
        while not all(_listening(a, port) for a in set(aliases.values())):
            assert proc.is_running() and time.monotonic() < deadline, (folder / "log").read_text()
            time.sleep(0.05)
        yield Sshd(port, client)
    finally:
        # -D keeps sshd in the foreground: its pid is the listener; sessions die with it.
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(proc, grace=5.0)
