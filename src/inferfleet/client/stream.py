"""One streamed completion, timed on the wire.

The request asks for usage in the stream (``stream_options.include_usage``)
so token counts come from the server (L-51). Every read is stamped with
``time.perf_counter_ns`` before any parsing (see :mod:`.sse`); JSON is
decoded only after the stream has ended.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from inferfleet.client.sse import SseFramer
from inferfleet.io import http

Api = Literal["chat", "completions"]
PATHS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass(frozen=True)
class Chunk:
    arrived_ns: int
    data: dict[str, Any]


@dataclass
class StreamResult:
    path: str
    status: int | None
    sent_ns: int
    done_ns: int
    first_byte_ns: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    server_timing: list[str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    saw_done: bool = False
    error: str | None = None
    error_body: str = ""
    retries: int = 0


def request_body(
    api: Api,
    *,
    model: str,
    text: str,
    max_tokens: int,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
    messages: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A streamed request for ``text`` (or, on chat, a whole conversation ``messages``)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True}
    if api == "chat":
        body["messages"] = messages or [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        # llama.cpp, vLLM and SGLang honour it: a measurement must generate
        # the tokens it asked for, not stop wherever the model likes (L-49).
        body["ignore_eos"] = True
    if extra:
        body.update(extra)
    return body


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> StreamResult:
    """Send ``body`` to ``path`` and read the whole event stream, stamping each read.

    A pooled connection the server closed while idle fails before any byte
    comes back (llama.cpp's HTTP server drops keep-alive connections after a
    few seconds); such a request never reached the model and is sent once
    more on a fresh connection, as OpenAI's own client does.
    """
    result, stale = _stream_once(client, path, body)
    if stale:
        retried, _stale = _stream_once(client, path, body)
        retried.retries = 1
        return retried
    return result


def _stream_once(
    client: httpx.Client, path: str, body: dict[str, Any]
) -> tuple[StreamResult, bool]:
    """One try; the flag says it failed on a stale pooled connection, before any answer."""
    framer = SseFramer()
    raw_events: list[tuple[int, str]] = []
    sent_ns = time.perf_counter_ns()
    result = StreamResult(path=path, status=None, sent_ns=sent_ns, done_ns=sent_ns)
    try:
        # Raw reads are framed as they come: a compressed stream would be unreadable.
        headers = {"Accept-Encoding": "identity"}
        with client.stream("POST", path, json=body, headers=headers) as response:
            result.status = response.status_code
            result.headers = {k.lower(): v for k, v in response.headers.items()}
            result.server_timing = response.headers.get_list("server-timing")
            if response.status_code != 200:
                result.error_body = response.read().decode("utf-8", "replace")[:2000]
                result.error = f"HTTP {response.status_code}"
                result.done_ns = time.perf_counter_ns()
                return result, False
            for piece in response.iter_raw():
                now = time.perf_counter_ns()
                if result.first_byte_ns is None:
                    result.first_byte_ns = now
                raw_events.extend((e.arrived_ns, e.data) for e in framer.feed(piece, now))
            result.done_ns = time.perf_counter_ns()
            raw_events.extend((e.arrived_ns, e.data) for e in framer.close(result.done_ns))
    except httpx.HTTPError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        result.done_ns = time.perf_counter_ns()
        if result.status is None and result.first_byte_ns is None and http.is_stale_connection(exc):
            return result, True
    # Parse only now: the clock readings above are already taken.
    for arrived_ns, data in raw_events:
        if data.strip() == "[DONE]":
            result.saw_done = True
            continue
        try:
            parsed = json.loads(data)
        except ValueError:
            result.error = result.error or f"an event is not JSON: {data[:120]!r}"
            continue
        if isinstance(parsed, dict):
            if "error" in parsed and "choices" not in parsed:
                result.error = result.error or f"error event: {json.dumps(parsed)[:300]}"
            result.chunks.append(Chunk(arrived_ns, parsed))
    return result, False


# Where chat answers carry reasoning text, by server (L-45).
REASONING_FIELDS = ("reasoning_content", "reasoning")


def new_salt() -> str:
    """64 random bits: never repeated within a benchmark, never guessable by a cache."""
    return secrets.token_hex(8)


def text_of(chunk: dict[str, Any]) -> tuple[str, str, str | None]:
    """(content, reasoning, reasoning field name) carried by one chunk."""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return "", "", None
    choice = choices[0]
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content") or ""
        for name in REASONING_FIELDS:
            value = delta.get(name)
            if isinstance(value, str) and value:
                return str(content), value, name
        return str(content), "", None
    return str(choice.get("text") or ""), "", None
