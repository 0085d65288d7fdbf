"""A budget as data for ``--json`` (schema ``inferfleet.budget/v1``); all sizes in bytes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from inferfleet.budget.groups import GroupFigure
from inferfleet.budget.measured import Comparison
from inferfleet.budget.plan import Budget, DeviceUse, Solution
from inferfleet.documents import Budget as BudgetData
from inferfleet.documents import (
    BudgetComparison,
    BudgetContext,
    BudgetDevice,
    BudgetGroup,
    BudgetModel,
    BudgetSolve,
    MemoryParts,
    document_of,
)

SCHEMA: Final[Literal["inferfleet.budget/v1"]] = "inferfleet.budget/v1"


def device_document(use: DeviceUse) -> BudgetDevice:
    # weights holds the measured non-KV cost (weights + compute) when measured is True.
    target = use.target
    return document_of(
        BudgetDevice,
        use,
        name=target.name,
        kind=target.kind,
        runtime_name=target.runtime_name,
        memory=target.memory,
    )


def budget_document(budget: Budget) -> BudgetData:
    request = budget.request
    context = request.context
    cells = budget.cells
    return BudgetData(
        model=BudgetModel(
            location=request.model.location,
            architecture=request.model.architecture,
            trained_context=request.model.context_length,
        ),
        context=BudgetContext(
            ctx=cells.n_ctx,
            ctx_per_slot=cells.n_ctx // context.parallel,
            parallel=context.parallel,
            cache_type_k=context.cache_type_k,
            cache_type_v=context.cache_type_v,
            flash_attn=context.flash_attn,
            n_ubatch=context.ubatch,
            unified=context.unified,
            streams=cells.streams,
            cells_full=cells.cells_full,
            cells_swa=cells.cells_swa,
            kv_bytes=budget.kv_bytes,
        ),
        devices=[device_document(d) for d in budget.devices],
        fits=budget.fits,
        notes=list(budget.notes),
    )


def solution_document(solution: Solution) -> BudgetSolve:
    per_slot = solution.ctx_per_slot
    parallel = solution.budget.request.context.parallel
    return BudgetSolve(
        ctx_per_slot=per_slot,
        ctx=None if per_slot is None else per_slot * parallel,
        limit=solution.limit,
    )


def comparison_document(comparisons: Sequence[Comparison]) -> list[BudgetComparison]:
    return [
        BudgetComparison(
            device=c.target,
            n_ctx=c.n_ctx,
            measured=MemoryParts(
                model=c.measured_model,
                context=c.measured_context,
                compute=c.measured_compute,
                total=c.measured_total,
            ),
            predicted=MemoryParts(
                model=c.predicted_model,
                context=c.predicted_context,
                compute=c.predicted_compute,
                total=c.predicted_total,
            ),
        )
        for c in comparisons
    ]


def group_document(figure: GroupFigure) -> BudgetGroup:
    return BudgetGroup(
        group=figure.group,
        max_loaded=figure.max_loaded,
        bytes=figure.bytes,
        counted=list(figure.counted),
        members=list(figure.members),
        unsized=list(figure.unsized),
    )
