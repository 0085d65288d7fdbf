"""Bench summaries in the ``inferfleet.bench/v1`` shape ``inferfleet bench --out`` writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def spread(median: float | None) -> dict[str, Any]:
    return {"n": 3, "median": median, "p10": median, "p90": median, "min": median, "max": median}


def summary(
    finished_at: str,
    *,
    service: str | None = "gemma",
    url: str = "http://127.0.0.1:8080",
    levels: dict[int, tuple[float, float, float]] | None = None,
) -> dict[str, Any]:
    """One arm; ``levels``: concurrency -> (decode tok/s per stream, aggregate tok/s, TTFT ms)."""
    levels = levels or {1: (38.5, 38.1, 120.0), 2: (27.0, 52.4, 180.0)}
    arm = "gemma" if service else url
    return {
        "schema": "inferfleet.bench/v1",
        "inferfleet": "0.1.0",
        "started_at": finished_at,
        "finished_at": finished_at,
        "options": {"api": "completions", "concurrency": sorted(levels), "max_tokens": 128},
        "arms": [{"name": arm, "kind": "running", "url": url, "service": service}],
        "levels": [
            {
                "arm": arm,
                "concurrency": c,
                "decode_tps": spread(d),
                "aggregate_tps": spread(a),
                "ttft_ms": spread(t),
            }
            for c, (d, a, t) in sorted(levels.items())
        ],
        "comparisons": [],
        "aborted": None,
    }


def write(folder: Path, name: str, doc: dict[str, Any] | str) -> Path:
    path = folder / name / "summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path
