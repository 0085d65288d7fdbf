"""Real test hosts: network namespaces on a bridge, each with its own OpenSSH server.

Each host is a network namespace with a veth into a bridge in the root
namespace (10.250.0.0/24; the tests talk only to these addresses and to
loopback). Its sshd runs inside ``unshare --uts --mount`` with an empty
``/root/.bashrc`` (root's rc costs 0.4 s a login) and a ``resolv.conf``
pointing at loopback (else lookups stall for 10 s) bound over the real ones
in that mount namespace only. Keys are thrown away with the lab.

Teardown is by name and pid only: every process still in a namespace we
made is killed by its pid, then the namespaces, veths and bridge we named
are deleted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.250.0"
BRIDGE_ADDRESS = f"{SUBNET}.1"


def sh(*argv: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


@dataclass
class TestHost:
    name: str
    netns: str
    address: str
    veth: str  # the root-namespace end
    sshd: subprocess.Popen[bytes] | None = None

    def link(self, up: bool) -> None:
        """Cut or restore the host's cable (the root end of its veth)."""
        sh("ip", "link", "set", self.veth, "up" if up else "down")

    def pids(self) -> list[int]:
        done = sh("ip", "netns", "pids", self.netns, check=False)
        return [int(p) for p in done.stdout.split()]

    def spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        """Start a process inside the host's network namespace (the test kills it by pid)."""
        handle = log.open("ab")
        return subprocess.Popen(
            ["ip", "netns", "exec", self.netns, *argv],
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@dataclass
class Lab:
    folder: Path
    tag: str
    hosts: dict[str, TestHost] = field(default_factory=dict)
    bridge: str = ""

    @property
    def client_key(self) -> Path:
        return self.folder / "id_ed25519"

    @property
    def ssh_config(self) -> Path:
        return self.folder / "ssh_config"

    def start(self, names: list[str]) -> None:
        for tool in ("sshd", "ip", "unshare", "ssh-keygen"):
            path = f"/usr/sbin/{tool}" if tool == "sshd" else tool
            if tool == "sshd" and not Path(path).exists():
                raise AssertionError("sshd is missing: apt-get install openssh-server")
        clash = sh("ip", "-o", "addr", "show", check=False).stdout
        if f" {BRIDGE_ADDRESS}/" in clash:
            raise AssertionError(
                f"{BRIDGE_ADDRESS} is already configured here (a leftover test bridge?): "
                "remove it with `ip link del <bridge>` before running the deploy tests"
            )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.client_key))
        host_key = self.folder / "ssh_host_ed25519_key"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
        (self.folder / "authorized_keys").write_text((self.folder / "id_ed25519.pub").read_text())
        (self.folder / "empty_rc").write_text("")
        (self.folder / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        self.bridge = f"ifbr{self.tag}"
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        public = (host_key.with_suffix(".pub")).read_text().split()
        known = []
        for index, name in enumerate(names):
            host = self._add_host(name, index, host_key)
            known.append(f"{host.address} {public[0]} {public[1]}")
        (self.folder / "known_hosts").write_text("\n".join(known) + "\n")
        self.ssh_config.write_text(
            f"Host {SUBNET}.*\n"
            "  User root\n"
            f"  IdentityFile {self.client_key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.folder / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
        )
        for host in self.hosts.values():
            _wait_listening(host)

    def _add_host(self, name: str, index: int, host_key: Path) -> TestHost:
        netns = f"if{self.tag}-{name}"
        veth = f"ifv{self.tag}{index}"
        inside = f"ifp{self.tag}{index}"
        address = f"{SUBNET}.{11 + index}"
        host = TestHost(name, netns, address, veth)
        self.hosts[name] = host
        sh("ip", "netns", "add", netns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", inside)
        sh("ip", "link", "set", inside, "netns", netns)
        sh("ip", "link", "set", veth, "master", self.bridge)
        sh("ip", "link", "set", veth, "up")
        sh("ip", "-n", netns, "addr", "add", f"{address}/24", "dev", inside)
        sh("ip", "-n", netns, "link", "set", inside, "up")
        sh("ip", "-n", netns, "link", "set", "lo", "up")
        folder = self.folder / name
        folder.mkdir()
        config = folder / "sshd_config"
        config.write_text(
            f"ListenAddress {address}\n"
            "Port 22\n"
            f"HostKey {host_key}\n"
            f"PidFile {folder / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.folder / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "PrintMotd no\n"
            "PrintLastLog no\n"
            "UseDNS no\n"
            "MaxSessions 64\n"
            "MaxStartups 64\n"
        )
        mounts = (
            f"mount --bind {self.folder / 'empty_rc'} /root/.bashrc && "
            if Path("/root/.bashrc").exists()
            else ""
        )
        script = (
            f"{mounts}mount --bind {self.folder / 'resolv.conf'} /etc/resolv.conf && "
            f"hostname {name} && exec /usr/sbin/sshd -D -e -f {config}"
        )
        log = (folder / "sshd.log").open("wb")
        host.sshd = subprocess.Popen(
            ["ip", "netns", "exec", netns, "unshare", "--uts", "--mount", "sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        return host

    def close(self) -> None:
        for host in self.hosts.values():
            # Everything left in a namespace we made is ours: servers a deploy
            # started, orphans a test planted, sshd itself. Killed by pid.
            for _round in range(3):
                pids = host.pids()
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.2)
            if host.sshd is not None:
                with contextlib.suppress(ProcessLookupError):
                    host.sshd.kill()
                host.sshd.wait(10)
            sh("ip", "link", "del", host.veth, check=False)
            sh("ip", "netns", "del", host.netns, check=False)
        if self.bridge:
            sh("ip", "link", "del", self.bridge, check=False)


def _wait_listening(host: TestHost, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert host.sshd is not None
        if host.sshd.poll() is not None:
            raise AssertionError(f"sshd of {host.name} exited with {host.sshd.returncode}")
        done = sh("ip", "netns", "exec", host.netns, "ss", "-Htln", check=False)
        if f"{host.address}:22" in done.stdout:
            return
        time.sleep(0.05)
    raise AssertionError(f"sshd of {host.name} is not listening on {host.address}:22")
