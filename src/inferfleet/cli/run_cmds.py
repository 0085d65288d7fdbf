"""Verbs that run services on this machine: up, down, status (logs, stop, start: ops_cmds)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from inferfleet.cli.fleet_cmds import (
    FleetOpt,
    HostOpt,
    JsonOpt,
    NoContractOpt,
    NoSshOpt,
    OfflineOpt,
    ResultsOpt,
    ServicesArg,
    WideOpt,
    one_file,
    resolve_fleet,
    scope,
    verb_output,
)
from inferfleet.errors import EXIT_FAILED, ContractFailingError, UsageError
from inferfleet.output import Output, esc

# The launch machinery (deploy.local: render, backends, httpx, psutil) and the
# progress bars load inside the verbs that use them: `status --help` and
# `logs` do not pay for `up`.
if TYPE_CHECKING:
    from rich.progress import Progress

    from inferfleet.deploy import local
    from inferfleet.documents import UpFront, UpService


def up_hooks(out: Output) -> tuple[local.Hooks, Progress | None]:
    from rich.progress import TaskID

    from inferfleet.cli.progress import bytes_progress, note_above, steps_progress
    from inferfleet.deploy import local

    if not out.human:
        return local.Hooks(), None
    progress = steps_progress(out, spinner=True)
    tasks: dict[str, TaskID] = {}

    def build_progress(done: int, total: int, _line: str) -> None:
        if "build" not in tasks:
            tasks["build"] = progress.add_task("building llama-server", total=total)
        progress.update(tasks["build"], completed=done, total=total)

    def hash_progress(total: int, count: int) -> Callable[[int], None]:
        bar = bytes_progress(out, f"verifying {count} model file(s) (sha256)")
        task = bar.add_task("hash", total=total)
        bar.start()

        def advance(n: int) -> None:
            bar.advance(task, n)
            if bar.tasks[0].completed >= total:
                bar.stop()

        return advance

    def health_state(state: str, seconds: float) -> None:
        label = {
            "down": "starting (not listening yet)",
            "loading": "loading the model (503)",
            "ok": "healthy",
            "foreign": "port answered by another process",
        }.get(state, state)
        out.note(f"  {seconds:6.2f}s  {label}")

    return (
        local.Hooks(
            note=note_above(progress),
            build_progress=build_progress,
            hash_progress=hash_progress,
            health_state=health_state,
        ),
        progress,
    )


def up(
    file: Path | None = typer.Argument(
        None,
        help="Fleet file (default: $INFERFLEET_FILE, ./fleet.yaml or the nearest parent's, "
        "else the embedded example).",
    ),
    file_opt: Path | None = FleetOpt,
    service: list[str] = typer.Option(
        [], "--service", "-s", help="Only these services (repeatable)."
    ),
    json_out: bool = JsonOpt,
    no_contract: bool = NoContractOpt,
    offline: bool = OfflineOpt,
) -> None:
    """Bring this machine's services up: build, verify, start, health-gate, check.

    The check is the contract probe after the health gate. A service that is
    healthy but fails it keeps running, is
    shown red with the evidence, stops the run, and up exits 3 (EXIT_CONTRACT).
    """
    out = verb_output(offline, json_out)
    from inferfleet.cli.fleet_cmds import embedded_example
    from inferfleet.deploy import local
    from inferfleet.deploy.last_up import remember
    from inferfleet.documents import UpDocument

    loaded = resolve_fleet(one_file(file, file_opt), out, example=True)
    names = [n for s in service for n in local.local_services(loaded, s)] or local.local_services(
        loaded
    )
    if not names:
        raise UsageError(
            f"no service of {loaded.path} runs on this machine",
            hint="services run here when their host's address is localhost or a loopback IP",
        )
    # Before anything starts: `status`, `down` and `logs` then find what this up ran.
    remember(loaded.path, example=loaded.path.resolve() == embedded_example().resolve())
    hooks, progress = up_hooks(out)
    with progress if progress is not None else contextlib.nullcontext():
        results = local.up(loaded, names, hooks, contract=not no_contract)
        failing = [r for r in results if r.contract_failing]
        pending = [n for n in names if n not in {r.service for r in results}]
        # The front door opens once the services it fronts are up and done: the gateway,
        # then the proxy in front of it.
        opened = [] if failing or pending or service else local.front_here(loaded)
        fronts = [done for n in opened if (done := local.up_front(loaded, n, hooks)) is not None]
    if json_out:
        doc = UpDocument(
            schema="inferfleet.up/v1",
            file=str(loaded.path),
            services=[_up_json(r) for r in results],
            pending=pending,
        )
        for done in fronts:
            doc["gateway" if done["name"] == "gateway" else "proxy"] = done
        out.emit(doc)
    else:
        print_up(out, results)
        for done in fronts:
            _print_front(out, done)
    if failing:
        first = failing[0]
        raise ContractFailingError(
            "healthy, but its contract probe fails: "
            + (first.evidence[0] if first.evidence else "see the checks above")
            + (f"; not started: {', '.join(pending)}" if pending else ""),
            where=f"service {first.service}",
            hint="it keeps running and its marker says 'contract: failing'; fix the fleet "
            "file or the runtime so the server honours what it declares (L-25), then up again",
        )


def print_up(out: Output, results: list[local.UpResult]) -> None:
    rows = []
    for r in results:
        seconds = "-" if r.seconds_to_healthy is None else f"{r.seconds_to_healthy:.2f}s"
        rows.append(
            [
                esc(r.service),
                esc(r.url),
                "-" if r.pid is None else str(r.pid),
                esc(r.model),
                f"{r.ctx_per_slot}x{r.parallel}",
                _up_health(r),
                seconds,
                r.action,
            ]
        )
    out.table(None, ["service", "url", "pid", "model", "ctx", "health", "ready in", "action"], rows)
    revisions = sorted({r.revision for r in results})
    out.line(
        "revision: "
        + ", ".join(
            "untracked (not a clean git checkout)" if v == "untracked" else v[:12]
            for v in revisions
        )
    )
    for r in results:
        if r.reason:
            out.line(f"  {esc(r.service)}: {r.action}, {esc(r.reason)}")
        for check in r.checks:
            mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
            out.line(f"  {mark} {esc(r.service)}: {esc(check.name)} ({esc(check.detail)})")


def _up_health(r: local.UpResult) -> str:
    if r.action == "held":
        return "[yellow]held[/yellow]"
    return "[red]contract failing[/red]" if r.contract_failing else "[green]healthy[/green]"


def _print_front(out: Output, g: UpFront) -> None:
    healthy_s = g["seconds_to_healthy"]
    seconds = "-" if healthy_s is None else f"{healthy_s:.2f}s"
    out.line(
        f"{g['name']}: [green]healthy[/green] {esc(g['url'])} (pid {g['pid'] or '-'}, "
        f"{esc(g['engine'])}, ready in {seconds}, {g['action']})"
        + (f"; clients trust the CA root {esc(g['root'])}" if g["root"] else "")
    )
    if g["unhealthy_backends"]:
        out.line(
            "  [yellow]not healthy behind it:[/yellow] " + esc(", ".join(g["unhealthy_backends"]))
        )


def _up_json(r: local.UpResult) -> UpService:
    from inferfleet.documents import MinimalCheck, UpService, document_of

    return document_of(
        UpService,
        r,
        checks=[document_of(MinimalCheck, c) for c in r.checks],
        health="held" if r.action == "held" else "healthy",
    )


def down(
    service: str | None = typer.Argument(None, help="One service (default: all of this machine)."),
    file: Path | None = FleetOpt,
    grace: float = typer.Option(10.0, help="Seconds between SIGTERM and SIGKILL."),
    json_out: bool = JsonOpt,
) -> None:
    """Stop this machine's services by their recorded pid (never by name, L-43)."""
    from inferfleet.deploy import local
    from inferfleet.documents import DownDocument, DownService, document_of

    out = Output(json_mode=json_out)
    loaded = resolve_fleet(file, out, last_up=True)
    # The reverse of up's order: a split server stops before its RPC workers.
    names = local.local_services(loaded, service)[::-1]
    # The front door closes first: it never answers for services already stopped.
    fronts = [] if service is not None else local.front_here(loaded)[::-1]
    closed = [local.down_front(loaded, name, grace=grace) for name in fronts]
    results = [
        local.down(loaded, name, grace=grace, on_wait=lambda t: out.note(esc(t))) for name in names
    ]
    for stopped in closed:
        if stopped is not None and stopped.outcome != "not-running":
            results.append(stopped)
    if json_out:
        out.emit(
            DownDocument(
                schema="inferfleet.down/v1",
                services=[document_of(DownService, r) for r in results],
            )
        )
        return
    for r in results:
        pid = f" (pid {r.pid})" if r.pid else ""
        extra = f": {esc(r.detail)}" if r.detail else ""
        out.line(f"{esc(r.service)}: {r.outcome}{pid}{extra}")


def status(
    services: list[str] = ServicesArg,
    host: list[str] = HostOpt,
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
    watch: float = typer.Option(0.0, "--watch", help="Refresh every N seconds (human mode)."),
    no_ssh: bool = NoSshOpt,
    results: Path | None = ResultsOpt,
    wide: bool = WideOpt,
) -> None:
    """Health, pid, uptime, slots, revision and last bench of every service; exit 1 on a problem.

    A problem is any service in scope that is not healthy (or held down on
    purpose): exit 0 only when every one is, as ``--json``'s ``ok`` says.
    """
    from inferfleet.status import Collector, Options
    from inferfleet.status.view import show

    out = Output(json_mode=json_out, wide=wide)
    loaded = resolve_fleet(file, out, last_up=True)
    only, hosts = scope(loaded.fleet, services or [], host, out)
    # With --watch, a host's ssh facts are reused for 30 s; HTTP is read every round.
    options = Options(ssh=not no_ssh, results_dir=results, facts_ttl=30.0 if watch > 0 else 0.0)
    collector = Collector(loaded, options)
    while True:
        current = collector.collect(hosts or None, services=only or None)
        if json_out:
            out.emit(current.document())
            break
        if watch > 0:
            out.console.clear()
        show(out, current)
        if watch <= 0:
            break
        time.sleep(watch)
    if not current.ok:
        raise typer.Exit(EXIT_FAILED)
