"""From a timed stream to one request's numbers.

Token counts are the server's (usage, llama.cpp ``timings``), never chunk
counts: speculative decoding packs several tokens in one chunk (L-51). The
clock readings are the client's. Both rates are computed the way llama.cpp
defines its own: decode is ``(generated - 1)`` tokens over the time from the
first generated token to the last (the first token comes from the prompt's
logits), prefill is the prompt tokens the server really processed (cached
ones excluded) over the time to the first generated token, counted from the
server's prompt-start event when it sends one (llama.cpp ``prompt_progress``)
and from the request's send time otherwise. The time before the prompt
started (HTTP, tokenizing, waiting for a slot) is ``server_wait_ms``.

A reasoning-only answer (``content`` null, all text in the reasoning field)
still has a first token and a decode rate (L-45); its time to first
*content* token is simply absent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from inferfleet.client import server_timing
from inferfleet.client.stream import StreamResult, text_of

MIN_DECODE_TOKENS = 128  # L-49: below this the inter-token figure is first-token noise
# Server-Timing metric names servers use for the two phases, in order of preference.
HEADER_PREFILL = ("prefill", "prompt", "prompt_eval")
HEADER_DECODE = ("decode", "generation", "gen")


@dataclass(frozen=True)
class RequestId:
    """Which request this is: arm, concurrency level, run, prompt, its salt and the API."""

    arm: str
    concurrency: int
    run: int
    prompt_id: str
    salt: str
    api: str

    def id_fields(self) -> dict[str, Any]:
        """The identity alone, as keyword arguments (a record starts with them)."""
        return {f.name: getattr(self, f.name) for f in fields(RequestId)}


@dataclass(frozen=True)
class RequestRecord(RequestId):
    status: int | None
    ok: bool
    error: str | None
    retries: int  # a stale pooled connection, resent before any byte came back
    queue_ms: float  # client side: taken by a worker until sent; in no latency below
    ttfb_ms: float | None  # first response byte
    ttfc_ms: float | None  # first event of the stream (may carry no text)
    ttft_ms: float | None  # first generated text, content or reasoning
    ttft_content_ms: float | None  # first content text (None for reasoning-only answers)
    e2e_ms: float
    prompt_tokens: int | None
    cached_tokens: int | None
    prompt_processed: int | None
    completion_tokens: int | None
    text_chunks: int
    tokens_per_chunk: float | None
    content_chars: int
    reasoning_chars: int
    reasoning_field: str | None
    content_null: bool
    finish_reason: str | None
    prefill_tps: float | None  # client clock, server counts
    prefill_from: str  # "prompt-start" (the server's progress event) | "send"
    decode_tps: float | None  # client clock, server counts
    server_prefill_tps: float | None  # the server's own figures, when it reports them
    server_decode_tps: float | None
    server_prompt_ms: float | None
    server_decode_ms: float | None
    server_wait_ms: float | None  # time to first token not spent in prefill: queue, parse
    server_timing: dict[str, float]
    decode_counted: bool  # enough tokens for the decode statistics (L-49)
    # A drafter's tokens proposed and accepted (llama-server timings draft_n and
    # draft_n_accepted); None where no drafter runs (L-48: acceptance is the workload's).
    draft_n: int | None
    draft_accepted: int | None
    started_s: float  # seconds since the level started (for timelines)
    finished_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Context(RequestId):
    """A request about to be measured: its identity and the clock readings it starts from."""

    enqueued_ns: int
    level_start_ns: int


def _ms(start: int | None, end: int | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start) / 1e6, 3)


def record(result: StreamResult, ctx: Context) -> RequestRecord:
    first_chunk: int | None = None
    prompt_start: int | None = None
    first_token: int | None = None
    first_content: int | None = None
    last_token: int | None = None
    content_chars = reasoning_chars = text_chunks = 0
    reasoning_field: str | None = None
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    finish_reason: str | None = None
    for chunk in result.chunks:
        data = chunk.data
        if first_chunk is None:
            first_chunk = chunk.arrived_ns
        if prompt_start is None and isinstance(data.get("prompt_progress"), dict):
            prompt_start = chunk.arrived_ns
        content, reasoning, field = text_of(data)
        if content or reasoning:
            text_chunks += 1
            if first_token is None:
                first_token = chunk.arrived_ns
            last_token = chunk.arrived_ns
        if content and first_content is None:
            first_content = chunk.arrived_ns
        content_chars += len(content)
        reasoning_chars += len(reasoning)
        reasoning_field = reasoning_field or field
        if isinstance(data.get("usage"), dict):
            usage = data["usage"]
        if isinstance(data.get("timings"), dict):
            timings = data["timings"]
        for choice in data.get("choices") or []:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                finish_reason = str(choice["finish_reason"])

    prompt_tokens = _int(usage.get("prompt_tokens"))
    completion_tokens = _int(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is None:
        cached = _int(timings.get("cache_n"))
    processed = _int(timings.get("prompt_n"))
    if processed is None and prompt_tokens is not None:
        processed = prompt_tokens - (cached or 0)

    ttft = _ms(result.sent_ns, first_token)
    decode_tps = None
    if completion_tokens is not None and completion_tokens > 1 and first_token and last_token:
        span = (last_token - first_token) / 1e9
        decode_tps = round((completion_tokens - 1) / span, 3) if span > 0 else None
    prefill_start = prompt_start if prompt_start is not None else result.sent_ns
    prefill_tps = None
    if processed and first_token is not None and first_token > prefill_start:
        prefill_tps = round(processed / ((first_token - prefill_start) / 1e9), 3)

    server_prompt_ms = _float(timings.get("prompt_ms"))
    server_decode_ms = _float(timings.get("predicted_ms"))
    server_prefill_tps = _float(timings.get("prompt_per_second"))
    server_decode_tps = _float(timings.get("predicted_per_second"))
    timing_header = server_timing.durations(result.server_timing)
    if not timings and timing_header:
        # A server without a timings body may still time itself in headers (L-50).
        server_prompt_ms = _first(timing_header, HEADER_PREFILL)
        server_decode_ms = _first(timing_header, HEADER_DECODE)
        if server_prompt_ms and processed:
            server_prefill_tps = round(processed / (server_prompt_ms / 1e3), 3)
        if server_decode_ms and completion_tokens and completion_tokens > 1:
            server_decode_tps = round((completion_tokens - 1) / (server_decode_ms / 1e3), 3)
    wait = _ms(result.sent_ns, prompt_start)
    if wait is None and ttft is not None and server_prompt_ms is not None:
        wait = round(max(0.0, ttft - server_prompt_ms), 3)

    ok = result.error is None and result.status == 200 and completion_tokens is not None
    error = result.error
    if error is None and result.status == 200 and completion_tokens is None:
        error = "the stream carried no usage (stream_options.include_usage ignored?)"
    if result.error_body:
        error = f"{error}: {result.error_body[:300]}"
    return RequestRecord(
        **ctx.id_fields(),
        status=result.status,
        ok=ok,
        error=error,
        retries=result.retries,
        queue_ms=round((result.sent_ns - ctx.enqueued_ns) / 1e6, 3),
        ttfb_ms=_ms(result.sent_ns, result.first_byte_ns),
        ttfc_ms=_ms(result.sent_ns, first_chunk),
        ttft_ms=ttft,
        ttft_content_ms=_ms(result.sent_ns, first_content),
        e2e_ms=round((result.done_ns - result.sent_ns) / 1e6, 3),
        prompt_tokens=prompt_tokens,
        cached_tokens=cached,
        prompt_processed=processed,
        completion_tokens=completion_tokens,
        text_chunks=text_chunks,
        tokens_per_chunk=(
            round(completion_tokens / text_chunks, 3) if completion_tokens and text_chunks else None
        ),
        content_chars=content_chars,
        reasoning_chars=reasoning_chars,
        reasoning_field=reasoning_field,
        content_null=ok and content_chars == 0 and reasoning_chars > 0,
        finish_reason=finish_reason,
        prefill_tps=prefill_tps,
        prefill_from="prompt-start" if prompt_start is not None else "send",
        decode_tps=decode_tps,
        server_prefill_tps=server_prefill_tps,
        server_decode_tps=server_decode_tps,
        server_prompt_ms=server_prompt_ms,
        server_decode_ms=server_decode_ms,
        server_wait_ms=wait,
        server_timing=timing_header,
        decode_counted=ok and (completion_tokens or 0) >= MIN_DECODE_TOKENS,
        draft_n=_int(timings.get("draft_n")),
        draft_accepted=_int(timings.get("draft_n_accepted")),
        started_s=round((result.sent_ns - ctx.level_start_ns) / 1e9, 4),
        finished_s=round((result.done_ns - ctx.level_start_ns) / 1e9, 4),
    )


def _first(durations: dict[str, float], names: tuple[str, ...]) -> float | None:
    for name in names:
        if name in durations:
            return round(durations[name], 3)
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(float(value), 3)
