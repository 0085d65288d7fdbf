"""Who holds a port (L-33, L-35): the kernel's bind test answers "nobody" cheaply, the
socket-table scan names a holder; both must agree with what a server would meet."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from inferfleet.backends import ports


@pytest.fixture
def v4_listener() -> Iterator[tuple[socket.socket, int]]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", 0))
    sock.listen()
    try:
        yield sock, sock.getsockname()[1]
    finally:
        sock.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_free_port_has_no_listener() -> None:
    port = free_port()
    assert ports.listeners(port, "127.0.0.1") == []
    assert ports.listeners(port) == []


def test_a_wildcard_listener_clashes_with_a_specific_bind_and_is_named(
    v4_listener: tuple[socket.socket, int],
) -> None:
    _sock, port = v4_listener
    for bind in ("127.0.0.1", "0.0.0.0", None):
        found = ports.listeners(port, bind)
        assert [(h.pid, h.port) for h in found] == [(os.getpid(), port)], bind
    assert "pid" in found[0].describe() and str(port) in found[0].describe()
    assert ports.owned_by(port, "127.0.0.1", os.getpid())


def test_a_specific_listener_clashes_with_the_wildcard_but_not_another_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert [h.pid for h in ports.listeners(port, "0.0.0.0")] == [os.getpid()]
        assert [h.pid for h in ports.listeners(port, "127.0.0.2")] == []


def test_a_bound_socket_that_does_not_listen_and_a_closed_one_hold_nothing() -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert ports.listeners(port, "127.0.0.1") == []
    assert ports.listeners(port, "127.0.0.1") == []


def test_an_address_that_is_not_this_machines_falls_back_to_the_scan(
    v4_listener: tuple[socket.socket, int],
) -> None:
    _sock, port = v4_listener
    # 192.0.2.1 (TEST-NET-1) cannot be bound here: the scan decides, and a
    # wildcard listener overlaps every address.
    assert not ports._bindable(port, "192.0.2.1")
    assert [h.pid for h in ports.listeners(port, "192.0.2.1")] == [os.getpid()]
    assert not ports._bindable(port, "not-an-address")


def test_ss_lines_name_each_owner_and_keep_an_unnamed_socket_unowned() -> None:
    """``sudo ss -Htlnp`` names a rootful container's socket for a deployer that is not
    root (L-33): one listener per owning pid, none named is pid None (never ours)."""
    text = (
        'LISTEN 0 512 127.0.0.1:8000 0.0.0.0:* users:(("llama-server",pid=41,fd=3))\n'
        'LISTEN 0 512 [::]:8000 [::]:* users:(("a",pid=7,fd=3),("a",pid=8,fd=3))\n'
        "LISTEN 0 128 0.0.0.0:8000 0.0.0.0:*\n"
        'LISTEN 0 128 127.0.0.1:18000 0.0.0.0:* users:(("other",pid=9,fd=3))\n'
        'LISTEN 0 128 10.0.0.5%eth0:8000 0.0.0.0:* users:(("b",pid=10,fd=4))\n'
    )
    found = ports.parse_ss(text, 8000)
    assert [(x.pid, x.address) for x in found] == [
        (41, "127.0.0.1"), (7, "::"), (8, "::"), (None, "0.0.0.0"), (10, "10.0.0.5"),
    ]  # fmt: skip
    # Only those that clash with the service's bind address.
    assert [x.pid for x in ports.parse_ss(text, 8000, "10.0.0.5")] == [7, 8, None, 10]
