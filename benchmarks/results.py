"""Benchmark results as JSON, and the comparison with the last run (a regression guard).

Every benchmark calls :func:`record` with its figures: they are written to
``benchmarks/results/<name>.json`` (the previous file kept as ``.prev.json``),
and each figure is printed next to the last run's value with the change, so a
slower build is seen in the same terminal. Timed *tests* stay out of the suite:
speed is judged here, against a reference measured in the same run.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(os.environ.get("INFERFLEET_BENCH_RESULTS", Path(__file__).parent / "results"))


def record(
    name: str,
    figures: dict[str, float],
    *,
    lower_is_better: set[str] | None = None,
    notes: dict[str, Any] | None = None,
) -> Path:
    """Write ``figures`` for benchmark ``name``; print each against the last run's value.

    ``lower_is_better`` names the figures where a drop is an improvement
    (seconds, bytes, requests); for the rest (rates, ratios) higher is better.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    previous: dict[str, Any] = {}
    if path.exists():
        try:
            previous = json.loads(path.read_text())
        except ValueError:
            previous = {}
        path.replace(RESULTS / f"{name}.prev.json")
    doc = {
        "benchmark": name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "figures": figures,
        "notes": notes or {},
    }
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    before = previous.get("figures", {}) if isinstance(previous, dict) else {}
    lower = lower_is_better or set()
    for key, value in sorted(figures.items()):
        old = before.get(key)
        if not isinstance(old, int | float) or old == 0:
            print(f"  {key}: {value:.4g} (no previous run)")
            continue
        change = (value - old) / abs(old)
        worse = change > 0.10 if key in lower else change < -0.10
        flag = "  <- regression?" if worse else ""
        print(f"  {key}: {value:.4g} (last run {old:.4g}, {change:+.0%}){flag}")
    print(f"results: {path}")
    return path
