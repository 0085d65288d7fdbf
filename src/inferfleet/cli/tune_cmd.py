"""``inferfleet tune SERVICE``: search the service's settings on this machine, measured.

Exit codes: 0 when the search ended (with a winner beyond the noise, or the
honest "no better setting"); 1 when it was aborted (memory that did not
come back, L-52) or the service could not be started again as it was; 2 on
bad input; 130 after Ctrl-C, once the service runs again as it did.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from inferfleet.bench.replay import load_replay
from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, resolve_fleet
from inferfleet.documents import TuneDocument
from inferfleet.errors import EXIT_FAILED, EXIT_INTERRUPTED, UsageError
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.output import Col, Output, esc


def tune(
    service: str = typer.Argument(..., help="A service of this machine."),
    budget: str = typer.Option("20m", "--budget", help="Time for the whole search (90s, 20m)."),
    space_file: Path | None = typer.Option(
        None, "--space", help="YAML: knobs and their values (narrows or widens the default)."
    ),
    objective_text: str = typer.Option(
        "decode", "--objective", help="decode, prefill, ttft or throughput@N."
    ),
    prompts: int | None = typer.Option(
        None, "--prompts", min=1, max=64, help="Prompts per run (default: one per stream)."
    ),
    max_tokens: int = typer.Option(128, "--max-tokens", min=16, help="Tokens per answer (L-49)."),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        help="JSONL of chat requests measured instead of the battery (see bench --replay).",
    ),
    take_over: bool = typer.Option(
        False, "--take-over", help="Stop the service for the search even while it serves traffic."
    ),
    memory_slack: str = typer.Option(
        "256MiB",
        "--memory-slack",
        help="Available memory that may stay missing after a candidate stops (L-52).",
    ),
    share_device: bool = typer.Option(
        False, "--share-device", help="Run next to other services (only with no memory knob)."
    ),
    write: bool = typer.Option(
        False, "--write", help="Set the winner in the fleet file (comments kept)."
    ),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Results folder (default: the state folder's tune/<time>)."
    ),
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Find the service's best settings by measurement, and propose them as a change.

    Every candidate is priced by `check` first (what does not fit is never booted),
    then started as a bench arm, health- and contract-gated, and measured on the
    bench's salted battery; successive halving spends the --budget on the best.
    The service is started again as it was, whatever happens (Ctrl-C included).
    """
    from inferfleet.fleetfile.quantities import parse_duration, parse_size
    from inferfleet.paths import state_dir
    from inferfleet.tune import report
    from inferfleet.tune.run import Objective, TuneOptions, cpus
    from inferfleet.tune.run import tune as run_tune
    from inferfleet.tune.space import combine, default_space, load_space

    out = Output(json_mode=json_out)
    objective = Objective.parse(objective_text)
    try:
        budget_s = parse_duration(budget)
    except ValueError as exc:
        raise UsageError(f"--budget: {exc}", hint="e.g. --budget 20m") from None
    if budget_s < 30:
        raise UsageError("--budget is under 30 s: not one boot and one run", hint="--budget 5m")
    loaded = resolve_fleet(file, out, last_up=True)
    fleet = loaded.fleet
    found = fleet.services.get(service)
    if found is None:
        raise UsageError(
            f"no service named {service!r} in {loaded.path}",
            hint=f"services: {', '.join(sorted(fleet.services)) or '(none)'}",
        )
    runtime = fleet.runtimes.get(found.runtime or "")
    if found.kind != "llm" or runtime is None or runtime.kind not in ("llama.cpp", "vllm"):
        raise UsageError(
            f"service {service!r} is not a llama.cpp or vLLM service",
            hint="tune searches the settings of llama-server and vLLM",
        )
    if found.group is not None:
        raise UsageError(
            f"service {service!r} runs in swap group {found.group!r}",
            hint="tune a service that runs its own server",
        )
    if not fleet.hosts[found.host].is_local(found.host):
        raise UsageError(
            f"service {service!r} runs on host {found.host!r}, not on this machine",
            hint=f"run the tune on {found.host}: its numbers are that host's",
        )
    if write and loaded.path.resolve().is_relative_to(Path(__file__).resolve().parents[1]):
        raise UsageError(
            "--write edits the fleet file: this is the embedded example",
            hint="`inferfleet init DIR` writes a fleet file of your own",
        )
    given = load_space(space_file) if space_file is not None else None
    where = str(space_file) if space_file is not None else "the default space"
    default = default_space(
        found,
        runtime.kind,
        fleet.hosts[found.host],
        cpus(),
        fleet.models.get(found.model or ""),
        _moe_blocks(loaded, service),
    )
    space = combine(default, given, runtime.kind, where)
    if share_device and space.memory:
        raise UsageError(
            "--share-device with knobs that change memory: the numbers would measure the "
            f"contention ({', '.join(sorted(space.knobs))})",
            hint="stop the other services first (L-52), or tune only threads next to them",
        )
    # Read once, and refused here, before the service is stopped.
    traffic = load_replay(replay) if replay is not None else None
    try:
        slack = parse_size(memory_slack)
    except ValueError as exc:
        raise UsageError(f"--memory-slack: {exc}", hint="e.g. --memory-slack 1GiB") from None
    options = TuneOptions(
        replay=traffic,
        memory_slack=slack,
        objective=objective,
        budget_s=budget_s,
        prompts=prompts,
        max_tokens=max_tokens,
        take_over=take_over,
        share_device=share_device,
    )
    out.note(
        f"tune {esc(service)}: {len(space.knobs)} knob(s) "
        f"({esc(', '.join(f'{k}={list(v)}' for k, v in sorted(space.knobs.items())))}), "
        f"objective {esc(objective.name)}, budget {budget_s:.0f} s"
    )
    folder = out_dir or _fresh(state_dir() / "tune")
    run = run_tune(loaded, service, space, options, note=lambda text: out.note(esc(text)))
    doc = report.document(run, options)
    written = report.write_results(folder, doc)
    wrote_file = False
    if write and doc["winner"] is not None and not run.result.interrupted:
        from inferfleet.cli.edits import write_checked
        from inferfleet.importers.fleetedit import edit

        assert run.result.winner is not None
        values = report.edits(
            service,
            found,
            run.result.winner.candidate.as_dict,
            run.result.baseline.candidate.as_dict,
        )
        text = edit(loaded.source, file=str(loaded.path), values=values, note=report.comment(doc))
        wrote_file = write_checked(loaded, text, out, dry_run=False, what=f"tuned {service}")
    if json_out:
        out.emit(doc)
    else:
        _show(out, doc, written, loaded.path if wrote_file else None, write)
    restored = doc["restored"]
    if run.result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if doc["aborted"] or (restored is not None and restored["error"]):
        raise typer.Exit(EXIT_FAILED)


def _moe_blocks(loaded: LoadedFleet, name: str) -> int | None:
    """The blocks of the service's model when it has experts (its header, read here)."""
    from inferfleet.checks.engine import CheckContext

    model = loaded.fleet.services[name].model
    if model is None or model not in loaded.fleet.models:
        return None
    found = CheckContext(loaded).header(model)
    if isinstance(found, str) or not found.expert_count:
        return None
    return found.block_count


def _fresh(folder: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    candidate, number = folder / stamp, 2
    while candidate.exists():
        candidate, number = folder / f"{stamp}-{number}", number + 1
    return candidate


def _show(
    out: Output, doc: TuneDocument, written: list[Path], fleet: Path | None, write: bool
) -> None:
    knobs = sorted(doc["space"])
    rows = []
    for c in doc["candidates"]:
        figure = "-" if c["median"] is None else f"{c['median']:g}"
        if c["runs"] and len(c["runs"]) > 1:
            figure += f" ({c['min']:g}-{c['max']:g}, {len(c['runs'])} runs)"
        rows.append(
            [
                esc(c["id"]),
                *[
                    esc(str(c["settings"].get(k) if c["settings"].get(k) is not None else "-"))
                    for k in knobs
                ],  # fmt: skip
                esc(c["status"]),
                figure,
                esc(c["reason"] or ""),
            ]
        )
    out.table(
        f"tune {esc(doc['service'])}: {esc(doc['metric'])}",
        [Col("candidate", ident=True), *knobs, "status", "figure", Col("why", drop=1)],
        rows,
    )
    from inferfleet.tune.report import conclusion

    counts = ", ".join(f"{n} {s}" for s, n in sorted(doc["counts"].items()))
    budget = " (the budget ended the search)" if doc["stopped_by_budget"] else ""
    out.line(f"{counts}; {doc['rungs']} rung(s) in {doc['elapsed_s']:.0f} s{budget}")
    out.line(("[green]winner[/green] " if doc["winner"] else "") + esc(conclusion(doc)))
    restored = doc["restored"]
    if restored is not None:
        if restored["error"]:
            out.line(f"[red]not restored[/red]: {esc(restored['error'])}")
        else:
            same = "same argv" if restored["same_argv"] else "[red]another argv[/red]"
            out.line(f"{esc(doc['service'])} runs again as before: pid {restored['pid']}, {same}")
    if fleet is not None:
        out.line(f"[green]wrote[/green] {esc(fleet)}: the winner's keys, with the measurement")
    elif write and doc["winner"] is None:
        out.line("nothing written: no setting beat the service as declared beyond the noise")
    for path in written:
        out.line(f"results: {esc(path)}")
