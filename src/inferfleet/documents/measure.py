"""Documents of ``probe`` and ``bench``."""

from __future__ import annotations

from typing import (
    Any,
    Literal,
)

from typing_extensions import TypedDict


class ProbeEvidence(TypedDict):
    request: str
    body: str
    status: int | None
    answer: str


class ProbeCheck(TypedDict):
    id: str
    title: str
    lesson: str | None
    status: Literal["pass", "fail", "skip"]
    summary: str
    evidence: list[ProbeEvidence]
    hint: str


class ProbeFindings(TypedDict):
    model: str | None
    runtime: str | None
    n_ctx_slot: int | None
    total_slots: int | None
    modalities: list[str]
    timings_in_body: bool
    server_timing: dict[str, float]
    reasoning_field: str | None
    content_null_on_budget: bool | None
    efforts_accepted: list[str]
    efforts_refused: dict[str, int | None]
    effort_map: dict[str, str]
    tools_ok: bool | None
    vision_ok: bool | None
    metrics_ok: bool | None


class ProbeTarget(TypedDict):
    label: str
    url: str
    service: str | None
    model: str | None
    declared: dict[str, Any] | None  # ctx_per_slot, parallel and the service's client block


# "pass" is a Python keyword: the functional form names it.
ProbeCounts = TypedDict("ProbeCounts", {"pass": int, "fail": int, "skip": int})


class ProbeDocument(TypedDict):
    schema: Literal["inferfleet.probe/v1"]
    target: ProbeTarget
    ok: bool
    counts: ProbeCounts
    checks: list[ProbeCheck]
    findings: ProbeFindings


class BenchHost(TypedDict):
    cpus: int | None
    machine: str
    python: str


class BenchPrompt(TypedDict):
    id: str
    kind: str
    title: str
    licence: str


class BenchBattery(TypedDict):
    name: str
    version: int
    prompts: list[BenchPrompt]


class BenchOptions(TypedDict):
    api: str
    concurrency: list[int]
    runs: int
    max_tokens: int
    ignore_eos: bool
    min_decode_tokens: int
    warmup: bool


class BenchArm(TypedDict):
    name: str
    kind: str  # running | started
    url: str
    service: str | None
    model: str | None
    runtime: str | None
    request_extra: dict[str, Any]
    server: dict[str, Any] | None  # the started server's life (bench.arms.ServerLife)
    cold_load_s: float | None  # a swap group member's load before measuring, on its own


class BenchCache(TypedDict):
    requests: int
    reported: int
    hits: int
    max_cached_tokens: int | None


class BenchDocument(TypedDict):
    """``bench --json`` and the ``summary.json`` it writes (one level per arm x concurrency)."""

    schema: Literal["inferfleet.bench/v1"]
    inferfleet: str
    started_at: str
    finished_at: str
    host: BenchHost
    battery: BenchBattery
    options: BenchOptions
    arms: list[BenchArm]
    levels: list[dict[str, Any]]  # bench.summary.level_summary: spreads per metric, runs
    comparisons: list[dict[str, Any]]  # A/B verdicts with their noise (bench.stats)
    cache: BenchCache
    aborted: str | None
    interrupted: bool  # Ctrl-C: the levels hold what finished before it
