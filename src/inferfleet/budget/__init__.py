"""Memory budgets for llama.cpp services: KV cache, weights, compute, per device (pure).

The KV arithmetic is llama.cpp's own (``inferfleet.gguf.kv``: cells padded to
256, the SWA cache capped at the window plus a micro-batch, one stream per
slot); this package places it on devices with the weights, estimates compute
buffers, adds the projector (L-28) and the drafter (L-15), and solves the
largest per-slot context that fits (L-27), from a formula or from real boots.
Nothing here reads files or the network: :func:`model_shape` takes an
inspection the caller made.
"""

from __future__ import annotations

from inferfleet.budget.boots import BootPoint, Calibration, DeviceFit, fit_one, fit_two
from inferfleet.budget.compute import ComputeEstimate, device_compute, output_buffer
from inferfleet.budget.context import ContextMemory, ContextShape, context_memory
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.memreport import BootReport, Breakdown, BreakdownRow, parse_lines, parse_log
from inferfleet.budget.placement import HOST, Target
from inferfleet.budget.plan import (
    DEFAULT_HEADROOM,
    MIB,
    Budget,
    BudgetRequest,
    DeviceUse,
    Drafter,
    Solution,
    plan,
    solve,
)
from inferfleet.budget.shape import ModelShape, RecurrentState, model_shape
from inferfleet.runtimes.llamacpp import CACHE_TYPES

__all__ = [
    "CACHE_TYPES",
    "DEFAULT_HEADROOM",
    "HOST",
    "MIB",
    "BootPoint",
    "BootReport",
    "Breakdown",
    "BreakdownRow",
    "Budget",
    "BudgetError",
    "BudgetRequest",
    "Calibration",
    "ComputeEstimate",
    "ContextMemory",
    "ContextShape",
    "DeviceFit",
    "DeviceUse",
    "Drafter",
    "ModelShape",
    "RecurrentState",
    "Solution",
    "Target",
    "context_memory",
    "device_compute",
    "fit_one",
    "fit_two",
    "model_shape",
    "output_buffer",
    "parse_lines",
    "parse_log",
    "plan",
    "solve",
]
