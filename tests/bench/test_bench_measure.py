"""From a timed stream to a request's numbers: server counts, client clock (L-45, L-49, L-51).

The chunks are shaped like the real answers of llama.cpp (timings) and
vLLM (``reasoning`` deltas, usage only).
"""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.bench.measure import Context, record
from inferfleet.client.stream import Chunk, StreamResult

MS = 1_000_000  # ns


def ctx() -> Context:
    return Context("arm", 1, 1, "p", "salt", "chat", enqueued_ns=0, level_start_ns=0)


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def final(usage: dict[str, Any], timings: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"choices": [], "usage": usage}
    if timings is not None:
        data["timings"] = timings
    return data


def result(chunks: list[tuple[int, dict[str, Any]]], done_ms: int = 5000) -> StreamResult:
    out = StreamResult(
        path="/v1/chat/completions", status=200, sent_ns=1 * MS, done_ns=done_ms * MS
    )
    out.first_byte_ns = chunks[0][0] * MS
    out.chunks = [Chunk(t * MS, data) for t, data in chunks]
    out.saw_done = True
    return out


def test_llama_cpp_stream_rates_from_server_counts_and_client_clock() -> None:
    chunks = [(101, delta(role="assistant", content=None))]
    chunks += [(101 + 25 * i, delta(content=f"w{i}")) for i in range(200)]
    usage = {
        "prompt_tokens": 400,
        "completion_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    timings = {
        "cache_n": 0,
        "prompt_n": 400,
        "prompt_ms": 99.0,
        "prompt_per_second": 4040.4,
        "predicted_n": 200,
        "predicted_ms": 4975.0,
        "predicted_per_second": 40.0,
    }
    chunks.append((101 + 25 * 199, final(usage, timings)))
    rec = record(result(chunks), ctx())
    assert rec.ok and rec.error is None
    assert rec.ttfc_ms == 100.0 and rec.ttft_ms == 100.0 and rec.ttft_content_ms == 100.0
    assert rec.decode_tps == pytest.approx(199 / 4.975, rel=1e-4)  # (n - 1) over first..last
    assert rec.prefill_tps == pytest.approx(400 / 0.100)
    assert (rec.server_decode_tps, rec.server_prefill_tps) == (40.0, 4040.4)
    assert rec.server_wait_ms == pytest.approx(1.0)
    assert rec.cached_tokens == 0 and rec.prompt_processed == 400
    assert rec.text_chunks == 200 and rec.tokens_per_chunk == 1.0 and rec.decode_counted


def test_L51_several_tokens_per_chunk_are_counted_by_usage_not_by_chunks() -> None:
    # Speculative decoding: 50 chunks carry 200 tokens.
    chunks = [(100 + 100 * i, delta(content="four tokens here")) for i in range(50)]
    chunks.append((5000, final({"prompt_tokens": 50, "completion_tokens": 200})))
    rec = record(result(chunks), ctx())
    assert rec.text_chunks == 50 and rec.tokens_per_chunk == 4.0
    assert rec.decode_tps == pytest.approx(199 / 4.9, rel=1e-4)
    assert rec.server_decode_tps is None and rec.prompt_processed == 50


def test_L45_a_reasoning_only_answer_has_a_first_token_but_no_content() -> None:
    chunks = [(200 + 20 * i, delta(reasoning="thinking...", content=None)) for i in range(150)]
    chunks.append((3200, final({"prompt_tokens": 20, "completion_tokens": 150})))
    rec = record(result(chunks), ctx())
    assert rec.ok and rec.content_null and rec.reasoning_field == "reasoning"
    assert rec.ttft_ms == 199.0 and rec.ttft_content_ms is None
    assert rec.decode_tps is not None and rec.decode_counted


def test_L49_short_generations_are_kept_but_not_counted_for_decode() -> None:
    chunks = [(100 + 10 * i, delta(content="x")) for i in range(8)]
    chunks.append((200, final({"prompt_tokens": 9, "completion_tokens": 8})))
    rec = record(result(chunks), ctx())
    assert rec.ok and not rec.decode_counted


def test_a_stream_without_usage_is_an_error_not_a_guess() -> None:
    chunks = [(100 + 10 * i, delta(content="x")) for i in range(200)]
    rec = record(result(chunks), ctx())
    assert not rec.ok and "include_usage" in (rec.error or "")
    assert rec.completion_tokens is None and rec.decode_tps is None


def test_an_http_error_keeps_the_servers_words() -> None:
    out = StreamResult(path="/v1/completions", status=400, sent_ns=0, done_ns=2 * MS)
    out.error, out.error_body = "HTTP 400", '{"error":{"type":"exceed_context_size_error"}}'
    rec = record(out, ctx())
    assert not rec.ok and "exceed_context_size_error" in (rec.error or "")


def test_L50_server_timing_headers_are_used_when_the_body_has_no_timings() -> None:
    chunks = [(100 + 20 * i, delta(content="x")) for i in range(129)]
    chunks.append((2660, final({"prompt_tokens": 300, "completion_tokens": 129})))
    out = result(chunks)
    out.server_timing = ["queue;dur=4, prefill;dur=95.0", 'decode;dur=2560;desc="gen"']
    rec = record(out, ctx())
    assert rec.server_timing == {"queue": 4.0, "prefill": 95.0, "decode": 2560.0}
    assert rec.server_prompt_ms == 95.0 and rec.server_decode_ms == 2560.0
    assert rec.server_prefill_tps == pytest.approx(300 / 0.095, rel=1e-4)
    assert rec.server_decode_tps == pytest.approx(128 / 2.56)
    assert rec.server_wait_ms == pytest.approx(99.0 - 95.0)


def test_prefill_is_timed_from_the_servers_prompt_start_event() -> None:
    """llama.cpp's return_progress: the wait before the prompt starts is not prefill."""
    progress = {"choices": [{"text": "", "index": 0}], "prompt_progress": {"processed": 0}}
    chunks: list[tuple[int, dict[str, Any]]] = [(41, progress)]  # 40 ms: HTTP, tokenize, queue
    chunks += [(141 + 25 * i, {"choices": [{"text": "w", "index": 0}]}) for i in range(130)]
    chunks.append((141 + 25 * 129, final({"prompt_tokens": 500, "completion_tokens": 130})))
    rec = record(result(chunks), ctx())
    assert rec.prefill_from == "prompt-start" and rec.ttfc_ms == 40.0 and rec.ttft_ms == 140.0
    assert rec.prefill_tps == pytest.approx(500 / 0.100)  # not 500 / 0.140
    assert rec.server_wait_ms == 40.0
