"""Real test hosts: network namespaces on a bridge, each with its own OpenSSH server.

Each host is a network namespace with a veth into a bridge in the root
namespace (a free 10.250.N.0/24; the tests talk only to these addresses and
to loopback). Its sshd runs inside ``unshare --uts --mount`` with an empty
``/root/.bashrc`` (root's rc costs 0.4 s a login) and a ``resolv.conf``
pointing at loopback (else lookups stall for 10 s) bound over the real ones
in that mount namespace only. Keys are thrown away with the lab.

Teardown is by name and pid only: every process still in a namespace we
made is killed by its pid, then the namespaces, veths and bridge we named
are deleted.

A run that was killed before its teardown (a session stopped mid-suite)
leaves its bridge, veths and namespaces behind. Every lab therefore records
what it creates, with its owner's pid, under ``/run/inferfleet-test-labs``
before creating it; the next lab tears down the records whose owner is gone,
plus unrecorded ``ifbrNNNN`` leftovers of the same naming scheme, and then
takes the first 10.250.N.0/24 that no interface here uses, so a live
concurrent run is never disturbed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SUBNET_PREFIX = "10.250"
REGISTRY = Path("/run/inferfleet-test-labs")
LEFTOVER_BRIDGE = re.compile(r"^ifbr(\d{4})$")


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
        return netns_pids(self.netns)

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
    subnet: str = ""  # e.g. "10.250.0"

    @property
    def record(self) -> Path:
        return REGISTRY / f"{self.tag}.json"

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
        reap_dead_labs()
        self.subnet = free_subnet()
        self.bridge = f"ifbr{self.tag}"
        self._register(names)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.client_key))
        host_key = self.folder / "ssh_host_ed25519_key"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
        (self.folder / "authorized_keys").write_text((self.folder / "id_ed25519.pub").read_text())
        (self.folder / "empty_rc").write_text("")
        (self.folder / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        public = (host_key.with_suffix(".pub")).read_text().split()
        known = []
        for index, name in enumerate(names):
            host = self._add_host(name, index, host_key)
            known.append(f"{host.address} {public[0]} {public[1]}")
        (self.folder / "known_hosts").write_text("\n".join(known) + "\n")
        self.ssh_config.write_text(
            f"Host {self.subnet}.*\n"
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
        address = f"{self.subnet}.{11 + index}"
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

    def _register(self, names: list[str]) -> None:
        """Write down what this lab will create, before creating it (see the module doc)."""
        REGISTRY.mkdir(mode=0o700, parents=True, exist_ok=True)
        record = {
            "owner": os.getpid(),
            "bridge": self.bridge,
            "netns": [f"if{self.tag}-{name}" for name in names],
            "veths": [f"ifv{self.tag}{index}" for index in range(len(names))],
        }
        temp = self.record.with_suffix(".tmp")
        temp.write_text(json.dumps(record))
        temp.replace(self.record)

    def close(self) -> None:
        for host in self.hosts.values():
            if host.sshd is not None:
                with contextlib.suppress(ProcessLookupError):
                    host.sshd.kill()
                host.sshd.wait(10)
        if self.bridge:
            teardown(
                self.bridge,
                [host.netns for host in self.hosts.values()],
                [host.veth for host in self.hosts.values()],
            )
        self.record.unlink(missing_ok=True)


def netns_pids(netns: str) -> list[int]:
    done = sh("ip", "netns", "pids", netns, check=False)
    return [int(p) for p in done.stdout.split()]


def teardown(bridge: str, namespaces: list[str], veths: list[str]) -> None:
    """Kill by pid whatever runs in the namespaces, then delete them, the veths, the bridge."""
    for netns in namespaces:
        # Everything left in a namespace we made is ours: servers a deploy
        # started, orphans a test planted, sshd itself.
        for _round in range(5):
            pids = netns_pids(netns)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        sh("ip", "netns", "del", netns, check=False)
    for veth in veths:
        sh("ip", "link", "del", veth, check=False)
    sh("ip", "link", "del", bridge, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_tag() -> str:
    """A lab tag (4 digits: interface names are at most 15 characters) no other live
    lab holds: claimed by creating its registry record exclusively, so two test runs
    started at once can never pick the same one (a pid modulo 10,000 could)."""
    REGISTRY.mkdir(mode=0o700, parents=True, exist_ok=True)
    reap_dead_labs()
    links = sh("ip", "-o", "link", "show", check=False).stdout
    for _ in range(200):
        tag = f"{random.SystemRandom().randrange(10000):04d}"
        if f" ifbr{tag}:" in links:
            continue
        claim = {"owner": os.getpid(), "bridge": f"ifbr{tag}", "netns": [], "veths": []}
        try:
            with (REGISTRY / f"{tag}.json").open("x") as handle:
                handle.write(json.dumps(claim))
        except FileExistsError:
            continue
        return tag
    raise AssertionError(f"no free lab tag after 200 tries (see {REGISTRY})")


def reap_dead_labs() -> None:
    """Tear down labs whose owning test run is gone (killed before its teardown)."""
    claimed: set[str] = set()
    if REGISTRY.is_dir():
        for path in sorted(REGISTRY.glob("*.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
                continue
            if _alive(int(record.get("owner", 0))):
                claimed.add(str(record.get("bridge")))
                continue
            teardown(str(record["bridge"]), list(record["netns"]), list(record["veths"]))
            path.unlink(missing_ok=True)
    # Leftovers from before labs were recorded: same naming scheme, nobody claims them.
    links = sh("ip", "-o", "link", "show", check=False).stdout
    namespaces = sh("ip", "netns", "list", check=False).stdout.split()
    for line in links.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        match = LEFTOVER_BRIDGE.match(name)
        if match is None or name in claimed:
            continue
        tag = match.group(1)
        veths = [
            other.split(":")[1].strip().split("@")[0]
            for other in links.splitlines()
            if len(other.split(":")) > 1 and other.split(":")[1].strip().startswith(f"ifv{tag}")
        ]
        teardown(name, [ns for ns in namespaces if ns.startswith(f"if{tag}-")], veths)


def free_subnet() -> str:
    """The first 10.250.N (N < 250) that no interface in this namespace uses."""
    used = sh("ip", "-o", "-4", "addr", "show", check=False).stdout
    for third in range(250):
        subnet = f"{SUBNET_PREFIX}.{third}"
        if f" {subnet}." not in used:
            return subnet
    raise AssertionError(
        f"every {SUBNET_PREFIX}.N.0/24 is in use here: remove leftover test bridges "
        "(`ip -o addr show` lists them) before running the deploy tests"
    )


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
