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
