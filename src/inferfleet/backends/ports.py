"""Facts about listening sockets: who holds a port (L-33, L-35)."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from inferfleet.io.become import NO_BECOME, Become

SS_TIMEOUT = 20.0
_SS_PID = re.compile(r"pid=(\d+)")


@dataclass(frozen=True)
class Listener:
    pid: int | None  # None: the socket's owner is not visible to this user
    address: str
    port: int

    def describe(self) -> str:
        if self.pid is None:
            return f"{self.address}:{self.port} (owner not visible to this user)"
        try:
            proc = psutil.Process(self.pid)
            cmd = " ".join(proc.cmdline()) or proc.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            cmd = "?"
        return f"pid {self.pid} ({cmd[:160]}) on {self.address}:{self.port}"


def listeners(port: int, bind: str | None = None, *, become: Become = NO_BECOME) -> list[Listener]:
    """Listening TCP sockets on ``port`` that clash with ``bind`` (any, if None).

    The kernel answers the common question first: when a socket can be bound
    to ``bind:port`` nothing listens there, and that costs microseconds. Only
    when it cannot is every process's socket table read (tens of milliseconds
    on a busy host), to name who holds it.

    A socket of another user's process has no visible owner (pid None): a
    rootful container's, for a deployer that is not root. With ``become``
    active (the host's ``become: sudo``) such sockets are named by ``ss -p``
    run as root (L-33); without it they stay unnamed, and so never pass as ours.
    """
    if _bindable(port, bind):
        return []
    found = []
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if bind is not None and not _overlaps(bind, conn.laddr.ip):
            continue
        found.append(Listener(conn.pid, conn.laddr.ip, conn.laddr.port))
    if become.active and any(listener.pid is None for listener in found):
        named = _listeners_as_root(port, bind, become)
        if named is not None:
            return named
    return found


def _listeners_as_root(port: int, bind: str | None, become: Become) -> list[Listener] | None:
    """The listeners on ``port`` as root sees them (``ss -Htlnp`` through ``become``);
    None when ss could not run (the unnamed sockets then stay unnamed)."""
    done = become.run(["ss", "-Htlnp", f"sport = :{port}"], timeout=SS_TIMEOUT)
    if done.returncode != 0:
        return None
    return parse_ss(done.stdout, port, bind)


def parse_ss(text: str, port: int, bind: str | None = None) -> list[Listener]:
    """Listeners on ``port`` from ``ss -Htlnp`` lines: one per owning pid (a socket
    shared by a forked server has several), pid None for a socket with no owner named."""
    found: list[Listener] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[0] != "LISTEN":
            continue
        address, _, number = fields[3].rpartition(":")
        address = address.strip("[]").split("%")[0]
        if not number.isdigit() or int(number) != port:
            continue
        address = "::" if address == "*" else address
        if bind is not None and not _overlaps(bind, address):
            continue
        pids: list[int | None] = [int(p) for p in _SS_PID.findall(line)] or [None]
        found.extend(Listener(pid, address, port) for pid in dict.fromkeys(pids))
    return found


def _bindable(port: int, bind: str | None) -> bool:
    """Whether a TCP socket could bind ``bind:port`` now (any address, if None).

    SO_REUSEADDR as servers set it, so a closing connection in TIME_WAIT does
    not count; a listener on the wildcard address clashes with every specific
    one and the reverse, as it will for the server. Anything unusual (an
    address that is not this machine's, no IPv6) answers False: the full
    scan decides then.
    """
    try:
        address = ipaddress.ip_address((bind or "::").split("%")[0])
    except ValueError:
        return False
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and address.is_unspecified:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            probe.bind((str(address), port))
    except OSError:
        return False
    return True


def _overlaps(a: str, b: str) -> bool:
    try:
        ia, ib = ipaddress.ip_address(a), ipaddress.ip_address(b.split("%")[0])
    except ValueError:
        return True
    if ia.is_unspecified or ib.is_unspecified:
        return True
    return ia == ib


def family_of(pid: int) -> set[int]:
    """The pid and all its descendants: a server may bind from a child."""
    try:
        proc = psutil.Process(pid)
        return {pid} | {child.pid for child in proc.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def owned_by(
    port: int, bind: str, pid: int, also: Iterable[int] = (), *, become: Become = NO_BECOME
) -> bool:
    """True when every clashing listener on the port belongs to ``pid`` or its children
    (or to ``also``: a container's processes, which are not its children, L-33);
    ``become``: how root names a socket this user cannot see the owner of."""
    found = listeners(port, bind, become=become)
    family = family_of(pid) | set(also)
    return bool(found) and all(listener.pid in family for listener in found)
