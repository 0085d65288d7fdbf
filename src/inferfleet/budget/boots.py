"""Non-KV cost measured by real boots (L-27): two boots give it exactly.

A boot at context ``c`` uses ``total(c) = KV(c) + nonKV(c)`` on a device. The
KV part is known exactly from the header (:mod:`.context`), so each boot
gives one point of ``nonKV`` (weights, compute buffers, what the allocator
rounds). Compute grows with the context only through the attention masks, a
straight line in ``n_ctx``; two boots with different contexts fix that line,
``nonKV(c) = intercept + slope x c``, and the budget solves ``KV(c) <= card -
nonKV(c) - headroom`` on it.

With a single boot the slope comes from the compute estimate and the boot
anchors the intercept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from inferfleet.budget.errors import BudgetError


@dataclass(frozen=True)
class BootPoint:
    """One measured boot on one device."""

    n_ctx: int  # the -c the server ran with (after its padding)
    non_kv: int  # bytes: measured total minus the context memory


@dataclass(frozen=True)
class DeviceFit:
    """``nonKV(n_ctx) = intercept + slope x n_ctx`` for one device."""

    intercept: float
    slope: float
    source: str  # "two boots" or "one boot + estimated slope"

    def at(self, n_ctx: int) -> int:
        return max(0, round(self.intercept + self.slope * n_ctx))


def fit_two(a: BootPoint, b: BootPoint) -> DeviceFit:
    """The line through two boots (L-27)."""
    if a.n_ctx == b.n_ctx:
        raise BudgetError(
            f"both boots ran at -c {a.n_ctx}: two boots need two different contexts",
            hint="boot once small and once large, e.g. --boot 8192=... --boot 65536=...",
        )
    slope = (b.non_kv - a.non_kv) / (b.n_ctx - a.n_ctx)
    notes = "two boots"
    if slope < 0:
        # Noise (MiB rounding) can tilt a flat line; non-KV never shrinks with context.
        slope = 0.0
        notes = "two boots (flat: the larger boot used less non-KV memory)"
    intercept = a.non_kv - slope * a.n_ctx
    return DeviceFit(intercept, slope, notes)


def fit_one(point: BootPoint, slope: float) -> DeviceFit:
    """One boot anchors a line whose slope comes from the compute estimate."""
    return DeviceFit(point.non_kv - slope * point.n_ctx, slope, "one boot + estimated slope")


@dataclass(frozen=True)
class Calibration:
    """Measured non-KV cost per device (target name -> line)."""

    devices: Mapping[str, DeviceFit]
    notes: tuple[str, ...] = field(default=())

    def non_kv(self, name: str, n_ctx: int) -> int:
        return self.devices[name].at(n_ctx)
