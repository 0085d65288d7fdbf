"""Reading headers over HTTP from a real server on 127.0.0.1 (L-07, L-11)."""

from __future__ import annotations

import re
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fixtures.gguf_builder import (
    ARRAY,
    F32,
    FLOAT32,
    INT32,
    STRING,
    GGUFBuilder,
    gemma3_like,
    write_split,
)

from inferfleet.gguf import GGUFError, SkippedArray, inspect, read_header
from inferfleet.gguf.source import HTTPSource, hf_token_for

MIB = 1 << 20
_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


@dataclass
class Served:
    """A file as the server sees it: a header, then ``zeros`` bytes of data."""

    head: bytes
    zeros: int = 0

    @property
    def size(self) -> int:
        return len(self.head) + self.zeros

    def chunks(self, start: int, end: int, step: int = 64 * 1024) -> Iterator[bytes]:
        pos = start
        while pos < end:
            stop = min(end, pos + step)
            if pos < len(self.head):
                stop = min(stop, len(self.head))
                yield self.head[pos:stop]
            else:
                yield b"\0" * (stop - pos)
            pos = stop


@dataclass
class Seen:
    host: str
    path: str
    range: str | None
    authorization: str | None


class FileServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, honour_range: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.honour_range = honour_range
        self.files: dict[str, Served] = {}
        self.status: dict[str, int] = {}
        self.redirects: dict[str, str] = {}
        self.seen: list[Seen] = []
        self.bytes_sent = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FileServer

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        srv = self.server
        path = self.path.split("?")[0]
        srv.seen.append(
            Seen(self.headers.get("Host", ""), path, self.headers.get("Range"),
                 self.headers.get("Authorization"))
        )  # fmt: skip
        if path in srv.redirects:
            self.send_response(302)
            self.send_header("Location", srv.redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in srv.status or path not in srv.files:
            body = b"Access to model is restricted"
            self.send_response(srv.status.get(path, 404))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        served = srv.files[path]
        match = _RANGE.fullmatch(self.headers.get("Range", "")) if srv.honour_range else None
        start, end = 0, served.size
        if match:
            start, end = int(match.group(1)), min(int(match.group(2)) + 1, served.size)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{served.size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        try:
            for chunk in served.chunks(start, end):
                self.wfile.write(chunk)
                with srv.lock:
                    srv.bytes_sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client hung up once it had the header: what we want


@pytest.fixture(params=[True, False], ids=["range", "no-range"])
def server(request: pytest.FixtureRequest) -> Iterator[FileServer]:
    srv = FileServer(honour_range=request.param)
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def range_server() -> Iterator[FileServer]:
    srv = FileServer(honour_range=True)
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_small_file_in_one_request(server: FileServer) -> None:
    server.files["/m.gguf"] = Served(gemma3_like().build())
    result = inspect(f"{server.url}/m.gguf")
    assert result.architecture == "gemma3" and result.block_count == 18
    assert result.full_attention_layers == (5, 11, 17)
    assert len(server.seen) == 1
    assert server.seen[0].range == "bytes=0-262143"


def _big_header() -> Served:
    # ~2.4 MiB of header (a 180,000-entry vocabulary) in front of 48 MiB of data.
    b = gemma3_like(n_vocab=8)
    b.kv("tokenizer.ggml.merges", ARRAY, (STRING, [f"m{i:05d}" for i in range(180_000)]))
    return Served(b.build(), zeros=48 * MIB)


def test_big_header_takes_few_round_trips_and_little_data(server: FileServer) -> None:
    served = _big_header()
    server.files["/big.gguf"] = served
    source = HTTPSource(f"{server.url}/big.gguf")
    try:
        header = read_header(source)
    finally:
        source.close()
    merges = header.metadata["tokenizer.ggml.merges"]
    assert isinstance(merges, SkippedArray) and merges.count == 180_000
    assert len(header.tensors) == 1 + 2 * 18
    assert header.file_size == served.size
    if server.honour_range:
        # 256 KiB reveal the counts and the merges' average length; the
        # second request is sized from them and brings the rest.
        assert source.requests == 2
        assert server.seen[0].range == "bytes=0-262143"
        assert server.seen[1].range.startswith("bytes=262144-")
        assert header.data_offset <= server.bytes_sent <= 2 * header.data_offset
    else:
        # Range ignored: one request, the body read only as far as needed.
        assert source.requests == 1
        assert server.bytes_sent < served.size // 2


def _tokenizer_header(model: str, n_vocab: int) -> Served:
    # The layouts llama.cpp's converters write: SentencePiece (``llama``) with
    # a score and a type per token; BPE (``gpt2``) with types and merges
    # (Llama 3 has about two merges per token).
    b = GGUFBuilder().kv("general.architecture", STRING, "llama")
    b.kv("tokenizer.ggml.model", STRING, model)
    b.kv("tokenizer.ggml.tokens", ARRAY, (STRING, [f"t{i:x}" * 2 for i in range(n_vocab)]))
    if model == "llama":
        b.kv("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0] * n_vocab))
    b.kv("tokenizer.ggml.token_type", ARRAY, (INT32, [1] * n_vocab))
    if model == "gpt2":
        merges = [f"t{i:x} t{i + 1:x}" for i in range(2 * n_vocab)]
        b.kv("tokenizer.ggml.merges", ARRAY, (STRING, merges))
    b.kv("tokenizer.chat_template", STRING, "{{ messages }}" * 100)
    for il in range(300):
        b.tensor(f"blk.{il}.attn_norm.weight", (640,), F32)
    return Served(b.build(), zeros=4 * MIB)


@pytest.mark.parametrize("model", ["llama", "gpt2"])
def test_a_vocabulary_header_takes_two_requests(range_server: FileServer, model: str) -> None:
    # The first 256 KiB end inside the token list; the second request is
    # sized from its average entry and the arrays that follow it.
    served = _tokenizer_header(model, 60_000)
    range_server.files["/v.gguf"] = served
    source = HTTPSource(f"{range_server.url}/v.gguf")
    try:
        header = read_header(source)
    finally:
        source.close()
    assert header.metadata["tokenizer.ggml.model"] == model
    assert len(header.tensors) == 300
    assert source.requests == 2
    assert header.data_offset <= range_server.bytes_sent <= 2 * header.data_offset


def test_token_goes_only_to_the_endpoints_origin_never_to_a_redirect(
    range_server: FileServer,
) -> None:
    port = range_server.server_address[1]
    range_server.files["/cdn/m.gguf"] = Served(gemma3_like().build())
    range_server.redirects["/resolve/m.gguf"] = f"http://localhost:{port}/cdn/m.gguf"
    source = HTTPSource(
        f"{range_server.url}/resolve/m.gguf", token="s3cret", endpoint=range_server.url
    )
    try:
        assert read_header(source).metadata["general.architecture"] == "gemma3"
    finally:
        source.close()
    first, second = range_server.seen
    assert first.authorization == "Bearer s3cret" and first.host.startswith("127.0.0.1")
    # Same host, another name: another origin, so no token (io/token_scope).
    assert second.host.startswith("localhost") and second.authorization is None


def test_hf_token_goes_by_origin_to_the_hub_and_a_configured_mirror(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert hf_token_for("https://huggingface.co/o/r/resolve/main/m.gguf") == "hf_x"
    assert hf_token_for("https://hf.co/o/r/resolve/main/m.gguf") == "hf_x"
    for elsewhere in (
        "https://cdn-lfs.hf.co/x",  # a CDN: signed URLs, never the token
        "http://huggingface.co/o/r/resolve/main/m.gguf",  # another scheme
        "https://huggingface.co:8443/m.gguf",  # another port
        "https://huggingface.co.evil.example/m.gguf",
        "http://127.0.0.1:8000/m.gguf",
    ):
        assert hf_token_for(elsewhere) is None, elsewhere
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8000/")  # a mirror, as `hf` allows
    assert hf_token_for("http://127.0.0.1:8000/o/r/resolve/main/m.gguf") == "hf_x"
    assert hf_token_for("http://127.0.0.1:8001/m.gguf") is None
    monkeypatch.delenv("HF_TOKEN")
    assert hf_token_for("https://huggingface.co/o/r/resolve/main/m.gguf") is None


@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [(404, "HTTP 404", "file name"), (403, "HTTP 403", "gated"), (401, "HTTP 401", "HF_TOKEN")],
)
def test_http_errors_are_clean(
    range_server: FileServer, status: int, message: str, hint: str
) -> None:
    range_server.status["/m.gguf"] = status
    url = f"{range_server.url}/m.gguf"
    with pytest.raises(GGUFError, match=message) as info:
        inspect(url)
    assert info.value.source == url and url in str(info.value)
    assert hint in info.value.hint


def test_unreachable_server_is_clean() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused
        with pytest.raises(GGUFError, match="cannot fetch the header"):
            inspect(f"http://127.0.0.1:{port}/m.gguf")


def test_split_over_http(range_server: FileServer) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_split(Path(tmp)):
            range_server.files[f"/r/{path.name}"] = Served(path.read_bytes())
    result = inspect(f"{range_server.url}/r/big-00002-of-00003.gguf")
    assert result.split_count == 3 and len(result.tensors) == 4 and result.name == "big"
    assert len(range_server.seen) == 3  # one request per part
