"""The download sink: pieces from httpx and buffers filled from a real socket, in order."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

from inferfleet.hub.download import CHUNK
from inferfleet.hub.sink import Sink


def _send(sock: socket.socket, data: bytes) -> threading.Thread:
    def run() -> None:
        try:
            sock.sendall(data)
        finally:
            sock.close()

    sender = threading.Thread(target=run)
    sender.start()
    return sender


def test_pieces_then_socket_reads_land_in_order_and_hash_as_one_file(tmp_path: Path) -> None:
    head = [os.urandom(65536), os.urandom(1000)]  # what httpx handed over first
    rest = os.urandom(5 * CHUNK + 12345)  # more than the sink's buffers: they are reused
    data = b"".join(head) + rest
    ours, theirs = socket.socketpair()
    sender = _send(theirs, rest)
    sink = Sink(tmp_path / "f.partial", size=len(data), git=True, start=0)
    try:
        for piece in head:
            sink.feed(piece)
        while sink.received < len(data):
            count = sink.fill(ours.recv_into, len(data) - sink.received)
            assert 0 < count <= CHUNK
        assert sink.fill(ours.recv_into, 1) == 0  # the peer closed
        digests = sink.digests()
    finally:
        sink.close()
        ours.close()
        sender.join()
    assert (tmp_path / "f.partial").read_bytes() == data
    assert digests.sha256 == hashlib.sha256(data).hexdigest()
    blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data, usedforsecurity=False)
    assert digests.gitsha1 == blob.hexdigest()


def test_a_resumed_sink_rehashes_the_prefix_and_never_reads_past_its_limit(
    tmp_path: Path,
) -> None:
    data = os.urandom(3 << 20)
    path = tmp_path / "f.partial"
    path.write_bytes(data[:1_000_003])
    ours, theirs = socket.socketpair()
    sender = _send(theirs, data[1_000_003:] + b"not part of the file")
    sink = Sink(path, size=len(data), git=False, start=1_000_003)
    rehashed: list[int] = []
    try:
        sink.rehash(cancelled=lambda: False, on_bytes=rehashed.append)
        while sink.received < len(data):
            assert sink.fill(ours.recv_into, len(data) - sink.received) > 0
        digests = sink.digests()
    finally:
        sink.close()
        ours.close()
        sender.join()
    assert sum(rehashed) == 1_000_003
    assert path.read_bytes() == data
    assert digests.sha256 == hashlib.sha256(data).hexdigest()
