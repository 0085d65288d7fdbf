"""Memory fit: every device holds what the services sharing it need (L-27, L-31, L-32).

The bill is ``inferfleet budget``'s own (:mod:`inferfleet.budget.fleet`): a
llama.cpp service's weights, KV cache, compute, output, projector and drafter
per device, from its model's header; a vLLM/SGLang service's declared share of
each device it takes (L-32); the headroom once per device; an APU's GTT
aperture and system RAM (L-31). A service whose header cannot be read here is
skipped with the reason, and the devices are judged without it: an overrun
found without it is an overrun all the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from inferfleet.budget import MIB, plan
from inferfleet.budget.fleet import Pool, fleet_request, host_pools
from inferfleet.budget.groups import simultaneous
from inferfleet.budget.measured import from_reports
from inferfleet.budget.plan import Budget
from inferfleet.budget.sizing import Sizing, sizing_of
from inferfleet.budget.vllm_service import VllmBudget, vllm_budget
from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.errors import FleetError


def _mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB"


def _pool_name(pool: Pool) -> str:
    if pool.name == "system RAM":
        return f"the system RAM of host {pool.host!r} (unified-memory GTT and host memory, L-31)"
    if pool.name == "host":
        return f"the memory of host {pool.host!r}"
    return f"device {pool.name!r} of host {pool.host!r}"


def _overrun(pool: Pool, over: int, engines: set[str], unsized: list[str]) -> Hit:
    by_service: dict[str, tuple[int, list[str]]] = {}
    for use in pool.uses:
        total, whats = by_service.get(use.service, (0, []))
        by_service[use.service] = (total + use.bytes, [*whats, use.what])
    parts = [
        f"{name} {_mib(total)} ({', '.join(dict.fromkeys(whats))})"
        for name, (total, whats) in by_service.items()
    ]
    if pool.headroom:
        parts.append(f"headroom {_mib(pool.headroom)}")
    assert pool.memory is not None  # an overrun needs a known size
    message = (
        f"{_pool_name(pool)} has {_mib(pool.memory)} and the services sharing it need "
        f"{_mib(pool.used + pool.headroom)}: {'; '.join(parts)} -- "
        f"{math.ceil(over / MIB):,} MiB over"
    )
    if unsized:
        message += f" (without {', '.join(unsized)}, which could not be sized here)"
    llama = [name for name in by_service if name not in engines]
    fixes = []
    if llama:
        solve = " and ".join(f"`inferfleet budget {name} --solve`" for name in llama)
        fixes.append(
            f"{solve} finds the largest ctx_per_slot that fits (L-27); lower ctx_per_slot, "
            "parallel or the kv_cache types to match"
        )
    if engines & set(by_service):
        fixes.append("lower gpu_memory_utilization of the vLLM/SGLang service (L-32)")
    fixes.append("or move a service to another device")
    services = list(by_service)
    return Hit(services[0] if len(services) == 1 else None, pool.path, message, "; ".join(fixes))


@rule("device-memory-fit", "L-27", "error")
def memory_fit(ctx: CheckContext) -> Iterator[Hit | Skip]:
    """the services sharing a device need more memory than it has"""
    fleet = ctx.fleet

    shape_of = ctx.shape_of

    for host_name in fleet.hosts:
        budgets: dict[str, Budget] = {}
        engines: list[tuple[str, str]] = []
        host_bills: dict[str, int] = {}
        unsized: dict[str, str] = {}
        for name, service in fleet.services.items():
            if service.host != host_name:
                continue
            sizing = sizing_of(fleet, ctx.root, name)
            if sizing.in_host_memory:
                found = vllm_sized(ctx, sizing)  # vLLM's CPU build: weights + KV pool in RAM
                if isinstance(found, str):
                    unsized[name] = found
                else:
                    host_bills[name] = found.host_bytes
            elif sizing.kind is not None and sizing.method in ("kv-pool", "engine-share"):
                engines.append((name, sizing.kind))
            elif sizing.method == "llama.cpp":  # a split is rpc-split-fit's
                try:
                    request = fleet_request(fleet, ctx.root, name, shape_of)
                    measured = ctx.boots(name)  # what the host measured beats the estimate
                    if measured:
                        request = replace(request, calibration=from_reports(request, measured))
                    budgets[name] = plan(request)
                except FleetError as exc:
                    unsized[name] = exc.render()
        engine_names = {name for name, _ in engines}
        # A swap group costs its largest simultaneous set, not every member.
        budgets = simultaneous(fleet, budgets)
        for pool in host_pools(fleet, host_name, budgets, engines, host_bills):
            over = pool.over
            if over is not None:
                yield _overrun(pool, over, engine_names, list(unsized))
        for name, reason in unsized.items():
            cause = ctx.missing_header(name) or reason
            yield Skip(name, f"memory of service {name!r} not sized: {reason}", cause)


def vllm_sized(ctx: CheckContext, sizing: Sizing) -> VllmBudget | str:
    """The vLLM service's budget from its model's config and headers, or why not."""
    name = sizing.service
    service = ctx.fleet.services[name]
    if service.model is None:
        return f"service {name!r} serves no model"
    found = ctx.safetensors(service.model)
    if isinstance(found, str):
        return found
    host = ctx.fleet.hosts[service.host]
    try:
        return vllm_budget(name, service, host, found, list(sizing.devices))
    except FleetError as exc:
        return exc.render()


@rule("vllm-kv-capacity", "L-25", "error")
def vllm_capacity(ctx: CheckContext) -> Iterator[Hit | Skip]:
    """a vLLM service's KV pool cannot hold every slot's window (per-slot window x slots)"""
    for name in ctx.fleet.services:
        sizing = sizing_of(ctx.fleet, ctx.root, name)
        if sizing.method != "kv-pool":
            continue  # a GGUF on vLLM: only its memory share is judged
        found = vllm_sized(ctx, sizing)
        if isinstance(found, str):
            yield Skip(name, f"KV capacity of service {name!r} not sized: {found}", found)
            continue
        if found.fits:
            continue
        capacity, settings = found.capacity, found.settings
        kind = "exactly" if found.exact else "by estimate"
        # vLLM schedules by the tokens sequences really hold: fewer full windows
        # than slots only queues requests when every slot is at its full window
        # (an operator's deliberate shape); not even one window is a refusal to start.
        if found.starts:
            after = (
                "; vLLM schedules by actual use, so slots wait only when all of them "
                "hold full windows at once"
            )
        else:
            after = "; vLLM refuses to start: not even one window fits"
        yield Hit(
            name,
            f"services.{name}.parallel",
            f"service {name!r}: vLLM's KV pool ({kind}) holds {capacity.tokens:,} tokens "
            f"({capacity.num_blocks:,} blocks of {capacity.shape.block_size}), "
            f"{capacity.requests_that_fit():,} windows of {settings.max_model_len:,} at once; "
            f"{settings.max_num_seqs} slots need {found.wanted_tokens:,}{after}",
            "lower ctx_per_slot or parallel, give the KV cache more memory "
            "(VLLM_CPU_KVCACHE_SPACE on CPU, gpu_memory_utilization on a GPU, L-32), "
            "or an fp8 kv_cache; a deliberate shape is kept with a waiver and its reason",
            None if not found.starts else "warning",
        )
