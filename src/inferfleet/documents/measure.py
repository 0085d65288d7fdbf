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


class TuneCandidate(TypedDict):
    id: str  # "baseline" (the service as declared) or cNNN
    baseline: bool
    settings: dict[str, int | float | str | None]  # knob -> value (None: the runtime's default)
    status: str  # measured | rejected | unfit | not reached
    reason: str  # why it was not booted (unfit) or not used (rejected)
    runs: list[float]  # the objective per run, in its last rung
    median: float | None
    min: float | None
    max: float | None
    rung: int  # the last rung it was measured in (-1: never)
    seconds: float  # spent on it, boots included


class TuneWinner(TypedDict):
    id: str
    settings: dict[str, int | float | str | None]
    median: float | None
    baseline_median: float | None
    diff_pct: float | None
    noise_pct: float | None  # the larger run-to-run spread of the two (L-48)


class TuneRestored(TypedDict):
    pid_before: int
    pid: int | None
    same_argv: bool  # the service runs again with the argv it ran with before the search
    error: str | None


class TuneDocument(TypedDict):
    """``tune --json`` and the ``summary.json`` it writes."""

    schema: Literal["inferfleet.tune/v1"]
    inferfleet: str
    service: str
    objective: str  # decode | prefill | ttft | throughput@N
    metric: str
    higher_better: bool
    concurrency: int
    started_at: str
    finished_at: str
    budget_s: float
    elapsed_s: float
    space: dict[str, list[int | float | str]]
    candidates: list[TuneCandidate]
    counts: dict[str, int]  # candidates per status
    rungs: int
    stopped_by_budget: bool
    aborted: str | None
    interrupted: bool
    verdict: str | None  # the best challenger against the baseline (bench.stats.compare)
    winner: TuneWinner | None  # only beyond the noise
    restored: TuneRestored | None  # None: the service was not running before the search
