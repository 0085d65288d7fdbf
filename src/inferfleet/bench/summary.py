"""The versioned summary of a benchmark (``inferfleet.bench/v1``).

Per arm and concurrency level: per-stream rates and the aggregate rate
apart (L-53), time to first chunk / token / content token, client queue time
apart from latency, the server's cache counts (L-47), generations too short
to count (L-49) and reasoning-only answers (L-45). Between arms: medians of
the per-run medians, the run-to-run noise and a verdict only beyond it.
"""

from __future__ import annotations

import os
import platform
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Final, Literal

from inferfleet import __version__
from inferfleet.bench.campaign import BenchResult
from inferfleet.bench.measure import MIN_DECODE_TOKENS, RequestRecord
from inferfleet.bench.runner import LevelResult
from inferfleet.bench.stats import Spread, compare, median
from inferfleet.documents import BenchDocument

SCHEMA: Final[Literal["inferfleet.bench/v1"]] = "inferfleet.bench/v1"
COMPARED = (
    ("decode_tps", "per-stream decode tok/s", True),
    ("aggregate_tps", "aggregate output tok/s", True),
    ("ttft_ms", "time to first token ms", False),
)


def _stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _spread(records: list[RequestRecord], key: str) -> dict[str, Any]:
    return asdict(Spread.of([getattr(r, key) for r in records]))


def _relative_error(records: list[RequestRecord], mine: str, theirs: str) -> dict[str, Any]:
    errors = []
    for r in records:
        a, b = getattr(r, mine), getattr(r, theirs)
        if a is not None and b:
            errors.append(abs(a - b) / b * 100.0)
    return asdict(Spread.of(errors))


def draft_acceptance(
    records: list[RequestRecord], levels: Sequence[LevelResult] = ()
) -> dict[str, Any] | None:
    """Tokens a drafter proposed and the share the target accepted, over the requests
    that report them (llama.cpp's timings), else over the levels whose server counts them
    in /metrics (vLLM); None where no drafter runs. The figure depends on the text
    drafted: on the real battery it is the workload's, not a synthetic one's (L-48)."""
    drafted = [r for r in records if r.draft_n is not None and r.draft_accepted is not None]
    if drafted:
        proposed = sum(r.draft_n or 0 for r in drafted)
        accepted = sum(r.draft_accepted or 0 for r in drafted)
        requests, counted_by = len(drafted), "answers"
    else:
        counted = [lv.server_draft for lv in levels if lv.server_draft is not None]
        proposed = sum(c[0] for c in counted)
        if not counted or not proposed:
            return None
        accepted = sum(c[1] for c in counted)
        requests, counted_by = len(records), "metrics"
    return {
        "requests": requests,
        "proposed": proposed,
        "accepted": accepted,
        "acceptance": round(accepted / proposed, 4) if proposed else None,
        "counted_by": counted_by,  # the server's per-answer timings, or its /metrics counters
    }


def level_summary(arm: str, concurrency: int, levels: list[LevelResult]) -> dict[str, Any]:
    records = [r for level in levels for r in level.records]
    ok = [r for r in records if r.ok]
    counted = [r for r in ok if r.decode_counted]
    runs = []
    for level in levels:
        good = [r for r in level.records if r.ok]
        runs.append(
            {
                "run": level.run,
                "wall_s": level.wall_s,
                "requests": len(level.records),
                "aggregate_tps": level.aggregate_tps,
                "decode_aggregate_tps": level.decode_aggregate_tps,
                "decode_tps": median(
                    [r.decode_tps for r in good if r.decode_counted and r.decode_tps]
                ),
                "ttft_ms": median([r.ttft_ms for r in good if r.ttft_ms is not None]),
            }
        )
    cached = [r.cached_tokens for r in ok if r.cached_tokens is not None]
    return {
        "arm": arm,
        "draft": draft_acceptance(ok, levels),
        "concurrency": concurrency,
        "requests": len(records),
        "ok": len(ok),
        "errors": sorted({r.error or "" for r in records if not r.ok}),
        "retries": sum(r.retries for r in records),
        # L-53: what one stream sees and what the endpoint delivers in all are different numbers.
        "decode_tps": _spread(counted, "decode_tps"),
        "aggregate_tps": asdict(Spread.of([run["aggregate_tps"] for run in runs])),
        # Decode alone, prefill left out: what N streams generate together (L-53).
        "decode_aggregate_tps": asdict(Spread.of([run["decode_aggregate_tps"] for run in runs])),
        "prefill_tps": _spread(ok, "prefill_tps"),
        "ttfc_ms": _spread(ok, "ttfc_ms"),
        "ttft_ms": _spread(ok, "ttft_ms"),
        "ttft_content_ms": _spread(ok, "ttft_content_ms"),
        "e2e_ms": _spread(ok, "e2e_ms"),
        "queue_ms": _spread(records, "queue_ms"),
        "server_wait_ms": _spread(ok, "server_wait_ms"),
        "server_decode_tps": _spread(counted, "server_decode_tps"),
        "server_prefill_tps": _spread(ok, "server_prefill_tps"),
        "decode_error_pct": _relative_error(counted, "decode_tps", "server_decode_tps"),
        "prefill_error_pct": _relative_error(ok, "prefill_tps", "server_prefill_tps"),
        "tokens_per_chunk": _spread(ok, "tokens_per_chunk"),
        "completion_tokens": _spread(ok, "completion_tokens"),
        "prompt_tokens": _spread(ok, "prompt_tokens"),
        "short_generations": len(ok) - len(counted),
        "reasoning_only": sum(1 for r in ok if r.content_null),
        "cache": {
            "reported": len(cached),
            "hits": sum(1 for c in cached if c > 0),
            "max_cached_tokens": max(cached, default=None),
        },
        "runs": runs,
    }


def summarise(result: BenchResult) -> BenchDocument:
    options = result.options
    grouped: dict[tuple[str, int], list[LevelResult]] = defaultdict(list)
    for level in result.levels:
        grouped[(level.arm, level.concurrency)].append(level)
    levels = [level_summary(arm, c, items) for (arm, c), items in grouped.items()]
    comparisons = []
    arm_names = [a.name for a in result.arms]
    if len(arm_names) > 1:
        by_key = {(lv["arm"], lv["concurrency"]): lv for lv in levels}
        base = arm_names[0]
        for other in arm_names[1:]:
            for c in options.concurrency:
                a, b = by_key.get((base, c)), by_key.get((other, c))
                if a is None or b is None:
                    continue
                for key, label, higher_is_better in COMPARED:
                    verdict = compare(
                        label,
                        base,
                        [run[key] for run in a["runs"]],
                        other,
                        [run[key] for run in b["runs"]],
                    )
                    comparisons.append(
                        {
                            **asdict(verdict),
                            "concurrency": c,
                            "metric": key,
                            "label": label,
                            "higher_is_better": higher_is_better,
                        }
                    )
    records = [r for r in result.records if r.ok]
    cached = [r.cached_tokens for r in records if r.cached_tokens is not None]
    return {
        "schema": SCHEMA,
        "inferfleet": __version__,
        "started_at": _stamp(result.started_at),
        "finished_at": _stamp(result.finished_at or time.time()),
        "host": {
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
        "battery": {
            "name": options.battery.name,
            "version": options.battery.version,
            "prompts": [
                {"id": p.id, "kind": p.kind, "title": p.title, "licence": p.licence}
                for p in options.prompts
            ],
        },
        "options": {
            "api": options.api,
            "concurrency": list(options.concurrency),
            "runs": options.runs,
            "max_tokens": options.load.max_tokens,
            "ignore_eos": options.load.ignore_eos,
            "min_decode_tokens": MIN_DECODE_TOKENS,
            "warmup": options.warmup,
        },
        "arms": [
            {
                "name": arm.name,
                "kind": arm.kind,
                "url": arm.target.base_url,
                "service": arm.target.service,
                "model": result.endpoints[arm.name].model if arm.name in result.endpoints else None,
                "runtime": (
                    result.endpoints[arm.name].runtime if arm.name in result.endpoints else None
                ),
                "request_extra": (
                    result.endpoints[arm.name].extra if arm.name in result.endpoints else {}
                ),
                "server": arm.server.to_json() if arm.server is not None else None,
                "cold_load_s": (
                    round(result.cold_loads[arm.name].seconds, 3)
                    if arm.name in result.cold_loads
                    else None
                ),
            }
            for arm in result.arms
        ],
        "levels": levels,
        "comparisons": comparisons,
        "cache": {
            "requests": len(records),
            "reported": len(cached),
            "hits": sum(1 for c in cached if c > 0),
            "max_cached_tokens": max(cached, default=None),
        },
        "aborted": result.aborted,
        "interrupted": result.interrupted,
    }
