"""A level of N streams really keeps N requests in flight, and its rates say so.

A loopback stand-in for an OpenAI-compatible server records when each
request arrives and when its stream ends; it "prefills" for a fixed time and
then "decodes" at a fixed rate per stream, whatever the number of streams,
so every figure of the level is known in advance. The runner must put
exactly ``concurrency`` requests on the wire at once (not one after another
behind a shared connection pool or a lock), and the level reports the
decode-only aggregate rate apart from the wall-clock one (L-53).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inferfleet.bench import runner
from inferfleet.bench.battery import load_battery
from inferfleet.bench.measure import Context, record
from inferfleet.bench.runner import Endpoint, LevelResult, Load, run_level
from inferfleet.client.stream import StreamResult

PREFILL_S = 0.4  # before the first token, per request
TOKEN_GAP_S = 0.02  # between tokens, per stream: 50 tok/s each
TOKENS = 20


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[float, float]] = []  # (arrived, finished), server clock
        self.bodies: list[dict[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recorder: Recorder

    def log_message(self, *_args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        arrived = time.monotonic()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(PREFILL_S)
        for i in range(TOKENS):
            self._event({"choices": [{"text": f" t{i}", "index": 0, "finish_reason": None}]})
            time.sleep(TOKEN_GAP_S)
        usage = {"prompt_tokens": 10, "completion_tokens": TOKENS}
        self._event({"choices": [], "usage": usage})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")
        with self.recorder.lock:
            self.recorder.spans.append((arrived, time.monotonic()))
            self.recorder.bodies.append(body)

    def do_GET(self) -> None:  # noqa: N802
        payload = b'{"object":"list","data":[{"id":"m"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _event(self, data: dict[str, Any]) -> None:
        self._chunk(f"data: {json.dumps(data)}\n\n".encode())

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@pytest.fixture
def stand_in() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    handler = type("BoundHandler", (Handler,), {"recorder": recorder})
    # The listen backlog stays at the standard library's 5, small as llama.cpp's HTTP
    # server's: eight connections opened at once overflow it.
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    finally:
        server.shutdown()
        server.server_close()


def most_in_flight(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def level(url: str, concurrency: int, prompts: int) -> LevelResult:
    endpoint = Endpoint("stand-in", url, "m", "completions")
    battery = load_battery().prompts
    chosen = [battery[i % len(battery)] for i in range(prompts)]
    return run_level(endpoint, chosen, concurrency, run=1, load=Load(max_tokens=TOKENS))


@pytest.mark.parametrize("concurrency", [4, 8])
def test_a_level_puts_all_its_streams_on_the_wire_at_once(
    stand_in: tuple[str, Recorder], concurrency: int
) -> None:
    url, recorder = stand_in
    result = level(url, concurrency, concurrency)
    assert all(r.ok for r in result.records), [r.error for r in result.records]
    assert len(recorder.spans) == concurrency
    arrivals = sorted(a for a, _ in recorder.spans)
    # All N arrive together, long before the first of them could have finished...
    assert arrivals[-1] - arrivals[0] < 0.1, [round(a - arrivals[0], 3) for a in arrivals]
    assert most_in_flight(recorder.spans) == concurrency
    # ...so the level takes one request's time, not N of them.
    one = PREFILL_S + TOKENS * TOKEN_GAP_S
    assert result.wall_s < 1.6 * one, (result.wall_s, one)
    # Every stream decodes at the server's per-stream pace, none collapses (L-53).
    for r in result.records:
        assert r.decode_tps is not None and r.decode_tps > 0.6 / TOKEN_GAP_S, r.decode_tps


def test_streams_leave_together_even_when_connections_are_slow_to_build(
    stand_in: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building an HTTP client costs CPU under the GIL (on a busy 2-core host, seconds for
    eight): a worker that sent as soon as its own was built let the first request
    prefill alone while the others were still building theirs."""
    url, recorder = stand_in
    real_client = runner.http.client
    building = threading.Lock()

    def slow_client(**kwargs: Any) -> Any:
        with building:  # one at a time, as CPU-bound work under the GIL is
            time.sleep(0.08)
        return real_client(**kwargs)

    monkeypatch.setattr(runner.http, "client", slow_client)
    result = level(url, 6, 6)
    assert all(r.ok for r in result.records)
    arrivals = sorted(a for a, _ in recorder.spans)
    assert arrivals[-1] - arrivals[0] < 0.1, [round(a - arrivals[0], 3) for a in arrivals]
    assert max(r.started_s for r in result.records) - min(r.started_s for r in result.records) < 0.1


def test_never_more_streams_than_the_level_and_every_prompt_salted_apart(
    stand_in: tuple[str, Recorder],
) -> None:
    url, recorder = stand_in
    result = level(url, 2, 6)
    assert len(result.records) == 6 and all(r.ok for r in result.records)
    assert most_in_flight(recorder.spans) == 2
    texts = [b["prompt"] for b in recorder.bodies]
    assert len(set(texts)) == 6  # L-47: no two requests share a prefix a cache could reuse
    assert {b["max_tokens"] for b in recorder.bodies} == {TOKENS}
    assert all(b["stream_options"] == {"include_usage": True} for b in recorder.bodies)
    assert not any("id_slot" in b for b in recorder.bodies)  # the server spreads them over slots


def test_decode_only_aggregate_leaves_prefill_out(stand_in: tuple[str, Recorder]) -> None:
    url, _ = stand_in
    result = level(url, 4, 4)
    per_stream = 1 / TOKEN_GAP_S
    decode_only = result.decode_aggregate_tps
    assert decode_only is not None and result.aggregate_tps is not None
    # Four streams decoding side by side deliver about four streams' worth (L-53)...
    assert 0.6 * 4 * per_stream < decode_only <= 4 * per_stream * 1.1, decode_only
    # ...while the wall-clock aggregate also pays for the prefill before them.
    assert result.aggregate_tps < decode_only


def _stream(sent: float, first: float, last: float, tokens: int) -> StreamResult:
    from inferfleet.client.stream import Chunk

    ns = 1_000_000_000
    chunks = [
        Chunk(int(first * ns), {"choices": [{"text": "a", "index": 0}]}),
        Chunk(int(last * ns), {"choices": [{"text": "b", "index": 0}]}),
        Chunk(int(last * ns), {"choices": [], "usage": {"completion_tokens": tokens}}),
    ]
    return StreamResult(
        path="/v1/completions",
        status=200,
        sent_ns=int(sent * ns),
        done_ns=int(last * ns),
        chunks=chunks,
        saw_done=True,
    )


def _records(spans: list[tuple[float, float, float, int]]) -> LevelResult:
    records = []
    for i, (sent, first, last, tokens) in enumerate(spans):
        ctx = Context("a", 2, 1, f"p{i}", "s", "completions", enqueued_ns=0, level_start_ns=0)
        records.append(record(_stream(sent, first, last, tokens), ctx))
    return LevelResult("a", 2, 1, max(s[2] for s in spans), records)


def test_decode_only_aggregate_counts_overlap_once_and_gaps_not_at_all() -> None:
    # Two streams decode 11 tokens each over [1, 2] and [1.5, 2.5]: 20 tokens after the
    # first ones, while at least one stream decoded for 1.5 s.
    both = _records([(0.0, 1.0, 2.0, 11), (0.0, 1.5, 2.5, 11)])
    assert both.decode_aggregate_tps == pytest.approx(20 / 1.5, rel=1e-3)
    # A gap where nobody decodes (a prefill) is not decode time.
    apart = _records([(0.0, 1.0, 2.0, 11), (2.0, 3.0, 4.0, 11)])
    assert apart.decode_aggregate_tps == pytest.approx(10.0, rel=1e-3)
    # Nothing decoded: no figure rather than zero or a division error.
    assert _records([(0.0, 1.0, 1.0, 1)]).decode_aggregate_tps is None
