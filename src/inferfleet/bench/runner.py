"""Concurrency levels against one endpoint: a closed loop of N streams.

A level puts every request in a queue at once and lets ``concurrency``
workers (threads, each with its own HTTP connection, built before any
request leaves) take them one at a time, all starting together, so exactly
that many streams are in flight until the queue runs dry. The
client's own time between taking a request and sending it (salting, body
encoding) is reported as ``queue_ms`` and never counted in its latencies,
which start when the request leaves. Per-stream rates and the level's aggregate rate are
kept apart: two streams can sum below one (L-53).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from inferfleet.bench.battery import Prompt, new_salt
from inferfleet.bench.measure import Context, RequestRecord, record
from inferfleet.client.stream import PATHS, Api, request_body, stream
from inferfleet.errors import UsageError
from inferfleet.io import http

OnRecord = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class Endpoint:
    arm: str
    base_url: str
    model: str
    api: Api
    runtime: str | None = None  # "llama.cpp" when /props says so
    extra: dict[str, Any] = field(default_factory=dict)  # added to every request body
    key: str | None = field(default=None, repr=False)  # its API key, when it requires one


def detect_runtime(base_url: str, *, timeout_s: float = 10.0, key: str | None = None) -> str | None:
    """llama.cpp serves /props with its generation settings; others do not."""
    with http.client(timeout=timeout_s, base_url=base_url, key=key) as client:
        try:
            response = client.get("/props")
            data = response.json() if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return None
    return "llama.cpp" if isinstance(data, dict) and "default_generation_settings" in data else None


def request_extra(runtime: str | None) -> dict[str, Any]:
    """Runtime-specific fields that keep the measurement whole and exact.

    Salting stops every prefix cache past the first text token (L-47), but
    llama.cpp still reuses a slot's BOS token (and a chat template's fixed
    prefix) from the previous prompt; ``cache_prompt: false`` makes it
    process the whole prompt, and its cache count then reads 0.
    ``return_progress`` makes it send an event the moment a prompt starts
    processing, so the client can split time to first token into waiting
    (HTTP, tokenizing, queueing for a slot) and prefill.
    """
    if runtime == "llama.cpp":
        return {"cache_prompt": False, "return_progress": True}
    return {}


@dataclass(frozen=True)
class Load:
    max_tokens: int = 256
    ignore_eos: bool = True
    timeout_s: float = 300.0


@dataclass
class LevelResult:
    arm: str
    concurrency: int
    run: int
    wall_s: float
    records: list[RequestRecord] = field(default_factory=list)
    # (drafted, accepted) tokens over the level by the server's /metrics counters, where
    # it counts them there instead of per answer (vLLM); None elsewhere.
    server_draft: tuple[int, int] | None = None

    @property
    def aggregate_tps(self) -> float | None:
        """Generated tokens per second of the whole level, all streams together (L-53)."""
        tokens = sum(r.completion_tokens or 0 for r in self.records if r.ok)
        return round(tokens / self.wall_s, 3) if self.wall_s > 0 and tokens else None

    @property
    def decode_aggregate_tps(self) -> float | None:
        """Decoded tokens per second while the endpoint was decoding, all streams together.

        The wall-clock aggregate also holds the prefills, which dominate a
        small model's time on a CPU; this one counts each stream's tokens
        after its first over the time at least one stream was between its
        first and last token, so whether N streams deliver more than one
        (L-53) shows even where prompts take longer than answers.
        """
        spans: list[tuple[float, float]] = []
        tokens = 0
        for r in self.records:
            if not (r.ok and r.ttft_ms is not None and r.decode_tps and r.completion_tokens):
                continue
            first = r.started_s + r.ttft_ms / 1e3
            spans.append((first, first + (r.completion_tokens - 1) / r.decode_tps))
            tokens += r.completion_tokens - 1
        busy = 0.0
        end = -math.inf
        for start, stop in sorted(spans):
            if stop > end:
                busy += stop - max(start, end)
                end = stop
        return round(tokens / busy, 3) if busy > 0 and tokens else None


def plan_requests(prompts: list[Prompt], concurrency: int) -> list[Prompt]:
    """Every prompt once, topped up (cycling) to a whole number of waves.

    A last wave with fewer streams than the level's concurrency would report
    a lower concurrency than it claims.
    """
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1", hint="e.g. --concurrency 1,2,4")
    if not prompts:
        raise UsageError("no prompts selected", hint="use --prompts N with N >= 1")
    total = math.ceil(len(prompts) / concurrency) * concurrency
    return [prompts[i % len(prompts)] for i in range(total)]


def run_level(
    endpoint: Endpoint,
    prompts: list[Prompt],
    concurrency: int,
    *,
    run: int,
    load: Load,
    on_record: OnRecord | None = None,
) -> LevelResult:
    work: queue.Queue[tuple[Prompt, str]] = queue.Queue()
    for prompt in plan_requests(prompts, concurrency):
        work.put((prompt, new_salt()))
    records: list[RequestRecord] = []
    lock = threading.Lock()
    failures: list[BaseException] = []
    level_start = time.perf_counter_ns()

    # Every worker opens its connection first and all start together: a stream that
    # left while the others were still building clients or connecting would prefill
    # alone (on a small CPU host, for seconds), and N connections opened at once can
    # overflow a server's listen backlog (a retry a second later).
    ready = threading.Barrier(concurrency)
    stop = threading.Event()

    def worker() -> None:
        path = PATHS[endpoint.api]
        with http.client(
            timeout=load.timeout_s, base_url=endpoint.base_url, key=endpoint.key
        ) as client:
            _connect(client)
            try:
                ready.wait()
            except threading.BrokenBarrierError:
                return  # another worker failed before the start; its error is raised
            while not stop.is_set():
                try:
                    prompt, salt = work.get_nowait()
                except queue.Empty:
                    return
                picked = time.perf_counter_ns()
                body = request_body(
                    endpoint.api,
                    model=endpoint.model,
                    text=prompt.salted(salt),
                    max_tokens=min(prompt.max_tokens or load.max_tokens, load.max_tokens),
                    ignore_eos=load.ignore_eos,
                    extra=endpoint.extra,
                    messages=prompt.chat_messages(salt) if prompt.messages else None,
                )
                result = stream(client, path, body)
                ctx = Context(
                    arm=endpoint.arm,
                    concurrency=concurrency,
                    run=run,
                    prompt_id=prompt.id,
                    salt=salt,
                    api=endpoint.api,
                    enqueued_ns=picked,
                    level_start_ns=level_start,
                )
                rec = record(result, ctx)
                with lock:
                    records.append(rec)
                if on_record is not None:
                    on_record(rec)

    def guarded() -> None:
        try:
            worker()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            ready.abort()  # no worker waits for one that will never come
            with lock:
                failures.append(exc)

    threads = [threading.Thread(target=guarded, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        # Ctrl-C keeps what was measured: no worker takes another prompt, the answers
        # that finished make a partial level, and requests still streaming are dropped
        # with their daemon threads (their figures would be cut short).
        stop.set()
        with lock:
            done = list(records)
        raise Interrupted(_level(endpoint.arm, concurrency, run, done)) from None
    if failures:
        raise failures[0]
    return _level(endpoint.arm, concurrency, run, records)


class Interrupted(Exception):
    """Ctrl-C during a level; ``level`` holds the requests that finished before it."""

    def __init__(self, level: LevelResult) -> None:
        super().__init__("interrupted")
        self.level = level


def _level(arm: str, concurrency: int, run: int, records: list[RequestRecord]) -> LevelResult:
    records.sort(key=lambda r: r.started_s)
    first_sent = min((r.started_s for r in records), default=0.0)
    last_done = max((r.finished_s for r in records), default=0.0)
    return LevelResult(arm, concurrency, run, round(last_done - first_sent, 4), records)


def draft_counters(endpoint: Endpoint) -> tuple[int, int] | None:
    """The server's (drafted, accepted) token counters now, where its /metrics has them.

    vLLM counts a drafter's work per engine, not per answer: the bench reads the
    counters around a level (its arm is the only client a started or idle server has).
    """
    from inferfleet.client.reports import metrics
    from inferfleet.errors import FleetError
    from inferfleet.runtimes.registry import draft_counts

    try:
        with http.client(timeout=10.0, base_url=endpoint.base_url, key=endpoint.key) as client:
            answer = client.get("/metrics")
        if answer.status_code != 200:
            return None
        return draft_counts(metrics(answer.text))
    except (httpx.HTTPError, FleetError):
        return None  # no counters: the level is measured without them


def _connect(client: httpx.Client) -> None:
    """Open the client's keep-alive connection with a cheap request any OpenAI server has.

    Whatever it answers, the connection is what counts; a server that cannot be
    reached fails the measured request itself, with its own error.
    """
    with contextlib.suppress(httpx.HTTPError):
        client.get("/v1/models").read()


def warm_up(endpoint: Endpoint, prompt: Prompt, *, timeout_s: float) -> None:
    """One short request that is not measured: pages the weights in, fills caches."""
    with http.client(timeout=timeout_s, base_url=endpoint.base_url, key=endpoint.key) as client:
        body = request_body(
            endpoint.api,
            model=endpoint.model,
            text=prompt.salted(new_salt()),
            max_tokens=8,
            extra=endpoint.extra,
        )
        stream(client, PATHS[endpoint.api], body)
