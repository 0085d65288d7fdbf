"""Turn real boots into a :class:`~inferfleet.budget.boots.Calibration` (L-27).

Two sources:

- ``--boot CTX=MiB``: what one device used at ``-c CTX`` (llama-server's
  memory breakdown ``self`` column for it, or the process's use in
  ``nvidia-smi``); applies to the service's first device;
- ``--from-log FILE``: a llama-server log (:mod:`.memreport`), whose memory
  breakdown has a row per device and one for host memory.

Either way the predicted context memory (exact, from the header) is taken
off, and what remains is the non-KV cost at that context. Two boots fix its
line; one boot takes the slope from the compute estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from inferfleet.budget.boots import BootPoint, Calibration, DeviceFit, fit_one, fit_two
from inferfleet.budget.context import ContextShape, context_memory
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.memreport import BootReport, BreakdownRow
from inferfleet.budget.placement import Target, place_by_layer, place_layers
from inferfleet.budget.plan import MIB, BudgetRequest, plan
from inferfleet.gguf.kv import CELL_PAD


@dataclass(frozen=True)
class Comparison:
    """One device of one boot: what the server reported against the prediction (bytes)."""

    target: str
    n_ctx: int
    measured_model: int
    measured_context: int
    measured_compute: int
    predicted_model: int
    predicted_context: int
    predicted_compute: int

    @property
    def measured_total(self) -> int:
        return self.measured_model + self.measured_context + self.measured_compute

    @property
    def predicted_total(self) -> int:
        return self.predicted_model + self.predicted_context + self.predicted_compute


def _at(request: BudgetRequest, n_ctx: int) -> BudgetRequest:
    return replace(request, context=replace(request.context, ctx=n_ctx), calibration=None)


def context_on(request: BudgetRequest, n_ctx: int) -> list[int]:
    """Predicted context memory (KV + recurrent state) per target at ``-c n_ctx``."""
    shaped = _at(request, n_ctx)
    memory = context_memory(shaped.model, shaped.context)
    layers = place_layers(
        shaped.model.n_layer,
        shaped.targets,
        split_mode=shaped.split_mode,
        shares=shaped.shares,
    )
    n = len(shaped.targets)
    kv = place_by_layer(memory.kv_by_layer, layers.caches, n)
    state = place_by_layer(memory.state_by_layer, layers.caches, n)
    return [a + b for a, b in zip(kv, state, strict=True)]


def _estimated_slope(request: BudgetRequest, index: int, n_ctx: int) -> float:
    """d(compute)/d(n_ctx) of the estimate on one target (the masks grow with the cells)."""
    step = CELL_PAD * request.context.parallel * 16
    low = plan(_at(request, n_ctx)).devices[index].compute
    high = plan(_at(request, n_ctx + step)).devices[index].compute
    return (high - low) / step


def _fit(request: BudgetRequest, index: int, points: Sequence[BootPoint]) -> DeviceFit:
    if len(points) >= 2:
        return fit_two(points[-2], points[-1])
    return fit_one(points[0], _estimated_slope(request, index, points[0].n_ctx))


def from_boots(request: BudgetRequest, boots: Sequence[tuple[int, int]]) -> Calibration:
    """``--boot CTX=MiB`` pairs (at most two) for the service's first device."""
    if not 1 <= len(boots) <= 2:
        raise BudgetError("give --boot once or twice (two boots solve the non-KV cost, L-27)")
    index = 0  # the first GPU, or host memory for a CPU-only service
    target = request.targets[index]
    points = []
    for ctx, used in boots:
        n_ctx = plan(_at(request, ctx)).cells.n_ctx
        context = context_on(request, ctx)[index]
        non_kv = used - context
        if non_kv < 0:
            raise BudgetError(
                f"--boot {ctx}={used // MIB}: that is less than the KV cache alone "
                f"({context / MIB:.2f} MiB) at -c {ctx}",
                hint="give the device's whole use (the breakdown's self column) at that -c",
            )
        points.append(BootPoint(n_ctx, non_kv))
    fit = _fit(request, index, points)
    return Calibration({target.name: fit}, (f"{target.name}: non-KV cost from {fit.source}",))


def _rows_for(report: BootReport, target: Target) -> list[BreakdownRow]:
    breakdown = report.breakdown
    if breakdown is None:
        return []
    if target.kind == "host":
        # Extra host buffer types (CPU_REPACK: weights repacked for the CPU) are real memory.
        return [r for r in breakdown.rows if r.kind in ("host", "buffer_type")]
    return [r for r in breakdown.rows if r.kind == "device" and r.name == target.runtime_name]


def report_shape(context: ContextShape, report: BootReport) -> ContextShape:
    """How the logged server really ran (its -c, slots, cache types, batch,
    flash attention); what the log does not say is taken from ``context``."""
    n_ctx = report.n_ctx
    if n_ctx is None:
        raise BudgetError(
            "the log does not say the context it ran with (llama_context: n_ctx = ...)",
            where=report.source,
            hint="keep the server's whole log; -lv 4 prints the context lines",
        )
    kv = next((c for c in report.caches if c.owner.startswith("llama_kv_cache")), None)
    flash = report.flash_attn
    if flash is None and report.params.get("flash_attn") in ("on", "enabled", "true", "1"):
        flash = True
    elif flash is None and report.params.get("flash_attn") in ("off", "disabled", "false", "0"):
        flash = False
    unified = report.params.get("kv_unified")
    return replace(
        context,
        ctx=n_ctx,
        parallel=report.n_seq_max or context.parallel,
        n_ubatch=report.n_ubatch or context.n_ubatch,
        cache_type_k=(kv.k_type if kv is not None and kv.k_type else context.cache_type_k),
        cache_type_v=(kv.v_type if kv is not None and kv.v_type else context.cache_type_v),
        flash_attn=context.flash_attn if flash is None else flash,
        unified=context.unified if unified is None else unified == "true",
    )


def compare(request: BudgetRequest, report: BootReport) -> list[Comparison]:
    """The report's devices against the prediction for the shape it ran with."""
    at = replace(request, context=report_shape(request.context, report), calibration=None)
    budget = plan(at)
    result = []
    for use in budget.devices:
        rows = _rows_for(report, use.target)
        if not rows:
            continue
        result.append(
            Comparison(
                target=use.target.name,
                n_ctx=budget.cells.n_ctx,
                measured_model=sum(r.model_mib for r in rows) * MIB,
                measured_context=sum(r.context_mib for r in rows) * MIB,
                measured_compute=sum(r.compute_mib for r in rows) * MIB,
                predicted_model=use.weights,
                predicted_context=use.kv + use.state,
                predicted_compute=use.compute,
            )
        )
    return result


def from_reports(request: BudgetRequest, reports: Sequence[BootReport]) -> Calibration:
    """One or two boot logs: a non-KV line for every device they report."""
    if not 1 <= len(reports) <= 2:
        raise BudgetError("give --from-log once or twice (two boots solve the non-KV cost, L-27)")
    notes: list[str] = []
    points: dict[int, list[BootPoint]] = {}
    for report in reports:
        ran = report_shape(request.context, report)
        differs = [
            f"{what} {theirs} (service: {ours})"
            for what, theirs, ours in (
                ("slots", ran.parallel, request.context.parallel),
                ("ubatch", ran.ubatch, request.context.ubatch),
                ("flash attention", ran.flash_attn, request.context.flash_attn),
                ("K cache", ran.cache_type_k, request.context.cache_type_k),
                ("V cache", ran.cache_type_v, request.context.cache_type_v),
            )
            if theirs != ours
        ]
        if differs:
            # Compute buffers follow these (L-30): the measured cost is used as is.
            notes.append(
                f"{report.source} ran with {', '.join(differs)}: re-measure with the "
                "service's own flags for an exact non-KV cost"
            )
        for comparison in compare(request, report):
            index = next(i for i, t in enumerate(request.targets) if t.name == comparison.target)
            non_kv = comparison.measured_model + comparison.measured_compute
            points.setdefault(index, []).append(BootPoint(comparison.n_ctx, non_kv))
    if not points:
        raise BudgetError(
            "the log's memory breakdown names none of this service's devices",
            where=reports[0].source,
            hint="use a log of this service's server (--log-jsonl), shut down cleanly",
        )
    devices = {}
    for index, found in points.items():
        fit = _fit(request, index, found)
        name = request.targets[index].name
        devices[name] = fit
        notes.append(f"{name}: non-KV cost from {fit.source}")
    return Calibration(devices, tuple(notes))
