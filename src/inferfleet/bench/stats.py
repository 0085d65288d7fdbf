"""Small, exact statistics: medians, percentiles, spread, and an honest verdict.

A difference between two arms is called only when it is larger than the
run-to-run noise of both (L-48): with one run there is no noise estimate and
so no verdict, just the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    data = sorted(v for v in values if v is not None and not math.isnan(v))
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50.0)


@dataclass(frozen=True)
class Spread:
    n: int
    median: float | None
    p10: float | None
    p90: float | None
    min: float | None
    max: float | None

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        data = [float(v) for v in values if v is not None]
        return cls(
            n=len(data),
            median=_r(median(data)),
            p10=_r(percentile(data, 10)),
            p90=_r(percentile(data, 90)),
            min=_r(min(data)) if data else None,
            max=_r(max(data)) if data else None,
        )


@dataclass(frozen=True)
class Verdict:
    metric: str
    a: str
    b: str
    median_a: float | None
    median_b: float | None
    diff_pct: float | None  # (b - a) / a
    noise_pct: float | None  # the larger run-to-run spread of the two arms
    verdict: str  # "b higher" | "b lower" | "within noise" | "no verdict: ..."


def compare(
    metric: str,
    a: str,
    runs_a: Sequence[float | None],
    b: str,
    runs_b: Sequence[float | None],
) -> Verdict:
    """Compare two arms from their per-run medians.

    Noise is each arm's run-to-run range relative to its median; the
    difference must exceed the larger of the two ranges to be called.
    """
    va = [float(v) for v in runs_a if v is not None]
    vb = [float(v) for v in runs_b if v is not None]
    ma, mb = median(va), median(vb)
    if ma is None or mb is None or ma == 0:
        return Verdict(metric, a, b, _r(ma), _r(mb), None, None, "no verdict: missing data")
    diff = (mb - ma) / ma * 100.0
    if len(va) < 2 or len(vb) < 2:
        return Verdict(
            metric, a, b, _r(ma), _r(mb), _r(diff), None, "no verdict: one run, noise unknown"
        )
    noise = max((max(va) - min(va)) / ma, (max(vb) - min(vb)) / mb) * 100.0
    text = "within noise" if abs(diff) <= noise else ("b higher" if diff > 0 else "b lower")
    return Verdict(metric, a, b, _r(ma), _r(mb), _r(diff), _r(noise), text)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
