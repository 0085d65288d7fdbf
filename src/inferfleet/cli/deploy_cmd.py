"""GitOps verbs: plan, deploy, apply (what deploy runs on each host) and rollback."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer

from inferfleet.cli.fleet_cmds import (
    HostOpt,
    JsonOpt,
    OfflineOpt,
    ServicesArg,
    WideOpt,
    scope,
    verb_output,
)
from inferfleet.deploy import apply as host_apply
from inferfleet.deploy import rollout
from inferfleet.deploy.errors import RemoteError
from inferfleet.deploy.planner import HELD, KEEP
from inferfleet.deploy.state import Emit
from inferfleet.documents import (
    DeployDocument,
    DeployHost,
    DeployPlanDocument,
    HostPlanRow,
    PlanDocument,
    PlannedItem,
    document_of,
)
from inferfleet.errors import (
    EXIT_CONTRACT,
    EXIT_FAILED,
    ContractFailingError,
    FleetError,
    UsageError,
)
from inferfleet.fleetfile.discover import default_fleet_path
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.output import Col, Output, esc

# Discovery ($INFERFLEET_FILE, ./fleet.yaml, the nearest parent's) is fleetfile.discover's,
# light enough for `apply`, which runs on every host of every deploy.
Plan = TypeVar("Plan", PlanDocument, DeployPlanDocument)

FileOpt = typer.Option(None, "--file", "-f", help="Fleet file in the fleet repo (./fleet.yaml).")
ServiceOpt = typer.Option([], "--service", "-s", help="Only these services (repeatable).")
ACTION_STYLE = {"deploy": "yellow", "retire": "red", "keep": "dim", "held": "yellow"}


def _loaded(file: Path | None) -> LoadedFleet:
    return load_fleet(file if file is not None else default_fleet_path())


# ---------------------------------------------------------------- plan


def plan(
    services: list[str] = ServicesArg,
    host: list[str] = HostOpt,
    file: Path | None = FileOpt,
    json_out: bool = JsonOpt,
    wide: bool = WideOpt,
) -> None:
    """Per host, the services whose inputs changed since the revision recorded there."""
    out = Output(json_mode=json_out, wide=wide)
    side = rollout.Fleetside.of(_loaded(file))
    only, hosts = scope(side.fleet, services or [], host, out)
    results = rollout.plan_hosts(side, side.hosts(hosts), services=only)
    if json_out:
        out.emit(_plan_document(PlanDocument, "inferfleet.plan/v1", side, results))
    else:
        out.line(f"plan for {side.revision[:12]} ({esc(side.fleet_path)})")
        _print_plans(out, results, actions=False)
    if any(r.error for r in results):
        raise typer.Exit(EXIT_FAILED)


def _plan_document(
    doc_type: type[Plan],
    schema: str,
    side: rollout.Fleetside,
    results: list[rollout.HostPlanResult],
) -> Plan:
    """``plan`` and ``deploy --dry-run``: the revision and each host's plan."""
    return document_of(doc_type, side, schema=schema, hosts=[_plan_json(r) for r in results])


def _plan_json(r: rollout.HostPlanResult) -> HostPlanRow:
    items = [] if r.plan is None else r.plan.items
    chosen = {i.service for i in r.selected}
    return HostPlanRow(
        host=r.host,
        error=r.error,
        lock=r.lock,
        items=[PlannedItem(**i.to_json(), selected=i.service in chosen) for i in items],
        actions=[a.to_json() for a in r.actions],
    )


def _print_plans(out: Output, results: list[rollout.HostPlanResult], *, actions: bool) -> None:
    rows = []
    for r in results:
        if r.error is not None:
            rows.append([esc(r.host), "-", "[red]unreachable[/red]", esc(r.error["message"]), ""])
            continue
        assert r.plan is not None
        if not r.plan.items:
            rows.append([esc(r.host), "-", "[dim]nothing[/dim]", "no services", ""])
        for item in r.plan.items:
            style = ACTION_STYLE.get(item.action, "white")
            label = "new" if item.new else item.action
            reasons = "; ".join(item.reasons) or "unchanged"
            recorded = item.recorded[:10] if item.recorded else "-"
            rows.append(
                [
                    esc(r.host),
                    esc(item.service),
                    f"[{style}]{label}[/{style}]",
                    esc(reasons),
                    recorded,
                ]
            )
    out.table(
        None,
        [
            Col("host", ident=True),
            Col("service", ident=True),
            "action",
            "why",
            Col("recorded", drop=1),
        ],
        rows,
    )
    for r in results:
        if r.lock:
            out.line(f"  [yellow]{esc(r.host)} is locked[/yellow]: {esc(r.lock)}")
        if actions and r.plan is not None:
            selected = {i.service for i in r.selected}
            out.line(f"[bold]{esc(r.host)}[/bold]: {len(selected)} service(s) to apply")
            for action in r.actions:
                out.line(f"  {esc(action.service)}: {action.kind:<16} {esc(action.detail)}")


# ---------------------------------------------------------------- deploy


def deploy(
    services: list[str] = typer.Argument(
        None, help="Services to deploy (and their hosts); with --drain: default all."
    ),
    host: list[str] = HostOpt,
    service: list[str] = ServiceOpt,
    drain: bool = typer.Option(
        False, "--drain", help="Every deployed service whose marker is behind and inputs changed."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and exact actions."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    file: Path | None = FileOpt,
    json_out: bool = JsonOpt,
    offline: bool = OfflineOpt,
) -> None:
    """Push, then on each host: git pull --ff-only and inferfleet apply, gated per service."""
    out = verb_output(offline, json_out)
    if not services and not service and not host and not drain:
        raise UsageError(
            "name what to deploy",
            hint="inferfleet deploy SERVICE ... or --host HOST ... (or --drain)",
        )
    side = rollout.Fleetside.of(_loaded(file))
    side.offline = offline
    only, hosts = scope(side.fleet, [*(services or []), *service], host, out)
    names = side.hosts(hosts)
    service = only
    if dry_run or not yes:
        results = rollout.plan_hosts(side, names, services=service, drain=drain, actions=dry_run)
        if json_out and dry_run:
            out.emit(_plan_document(DeployPlanDocument, "inferfleet.deploy-plan/v1", side, results))
        else:
            _print_plans(out, results, actions=dry_run)
        if dry_run:
            if any(r.error for r in results):
                raise typer.Exit(EXIT_FAILED)
            return
        if not sys.stdin.isatty():
            raise UsageError(
                "deploy asks for confirmation and there is no terminal to ask on",
                hint="pass -y to deploy without asking",
            )
        if not typer.confirm(f"deploy {side.revision[:12]} to {', '.join(names)}?"):
            raise typer.Exit(EXIT_FAILED)
    runs = rollout.deploy(side, names, services=service, drain=drain, on_event=_progress(out))
    _report_runs(out, side.revision, runs, json_out)


def _progress(out: Output) -> rollout.OnEvent:
    lock = threading.Lock()

    def on_event(host: str, event: dict[str, Any]) -> None:
        kind = event.get("event")
        svc = esc(event.get("service", ""))
        if kind == "step":
            text = f"{svc}: {event.get('kind')} {esc(event.get('detail', ''))}"
        elif kind == "health":
            text = f"{svc}: health {event.get('state')} after {event.get('seconds', 0):.2f}s"
        elif kind == "done":
            text = _done_text(event)
        elif kind == "contract":
            text = _contract_text(event)
        elif kind == "failed":
            text = f"{svc}: [red]failed[/red]: {esc(event.get('message', ''))}"
        elif kind == "plan":
            text = "to apply: " + (
                ", ".join(esc(s) for s in event.get("selected", [])) or "nothing"
            )
            held = event.get("held") or {}
            if isinstance(held, dict) and held:
                text += "; left down: " + "; ".join(
                    f"{esc(s)} ({esc(why)})" for s, why in held.items()
                )
        elif kind == "pull":
            text = esc(event.get("detail", ""))
        elif kind == "output":
            text = f"[dim]{esc(event.get('line', ''))}[/dim]"
        else:
            return
        with lock:
            out.note(f"[bold]{esc(host)}[/bold] {text}")

    return on_event


def _done_text(event: Mapping[str, Any]) -> str:
    svc = esc(event.get("service", ""))
    outcome = str(event.get("outcome", ""))
    style = "red" if outcome == host_apply.OUTCOME_CONTRACT_FAILING else "green"
    text = f"{svc}: [{style}]{esc(outcome)}[/{style}] in {event.get('seconds')}s"
    restored = event.get("restored") or []
    if restored:
        text += f"; {_restored_text(restored)}"
    return text


def _restored_text(restored: Sequence[Mapping[str, str]]) -> str:
    """``restored from archive: ENTRY (N files)`` per entry (a rollback of a retired service)."""
    by_entry: dict[str, int] = {}
    for row in restored:
        by_entry[str(row.get("entry", ""))] = by_entry.get(str(row.get("entry", "")), 0) + 1
    return "; ".join(
        f"restored from archive: {esc(e)} ({n} file{'s' if n != 1 else ''})"
        for e, n in by_entry.items()
    )


def _contract_text(event: Mapping[str, Any]) -> str:
    """The contract probe's verdict after the health gate, with its first evidence line."""
    svc = esc(event.get("service", ""))
    if event.get("state") == "passed":
        return f"{svc}: contract [green]passed[/green]"
    evidence = event.get("evidence") or []
    first = f": {esc(str(evidence[0]))}" if evidence else ""
    return f"{svc}: contract [red]failing[/red]{first}"


def _host_state(run: rollout.HostRun) -> str:
    if run.ok:
        return "[green]ok[/green]"
    if (run.result or {}).get("outcome") == host_apply.OUTCOME_CONTRACT_FAILING:
        return "[red]contract failing[/red]"
    return "[red]failed[/red]"


def _report_runs(out: Output, revision: str, runs: list[rollout.HostRun], json_out: bool) -> None:
    if json_out:
        out.emit(
            DeployDocument(
                schema="inferfleet.deploy/v1",
                revision=revision,
                hosts=[
                    DeployHost(host=r.host, ok=r.ok, result=r.result, error=r.error) for r in runs
                ],
            )
        )
    rows = []
    failures: list[str] = []
    logs: list[str] = []
    contract_only = True  # every failure is a healthy service failing its contract
    for run in runs:
        result = run.result or {}
        done = ", ".join(f"{d['service']} ({d['outcome']})" for d in result.get("done", []))
        pending = result.get("pending", [])
        failed = run.error or result.get("failed")
        state = _host_state(run)
        if failed and (
            run.error is not None or result.get("outcome") != host_apply.OUTCOME_CONTRACT_FAILING
        ):
            contract_only = False
        rows.append(
            [
                esc(run.host),
                state,
                esc(done or "-"),
                esc((failed or {}).get("service") or "-"),
                esc(", ".join(pending) or "-"),
            ]
        )
        if failed:
            failures.append(_failure_text(run.host, failed, pending))
            if failed.get("log_tail"):
                logs.append(f"[{run.host}] {failed['log_tail']}")
    out.table(None, ["host", "result", "done", "failed", "pending"], rows)
    if failures and contract_only:
        raise ContractFailingError(
            "\n".join(failures),
            hint="the failing services run (healthy) and their markers say 'contract: failing'; "
            "fix the cause, commit and deploy again (the planner redeploys them)",
        )
    if failures:
        raise RemoteError(
            "\n".join(failures),
            hint="fix the cause and deploy again: done services keep their new revision, "
            "the failed and pending ones were not recorded",
            log_tail="\n".join(logs),
        )


def _failure_text(host: str, failed: Mapping[str, Any], pending: list[str]) -> str:
    where = failed.get("where") or f"host {host}"
    text = f"{host}: {where}: {failed.get('message', '')}"
    evidence = failed.get("evidence") or []
    if len(evidence) > 1:
        text += "; " + "; ".join(str(line) for line in evidence[1:])
    if pending:
        text += f" (pending, left as they run: {', '.join(pending)})"
    if failed.get("hint"):
        text += f" -- {failed['hint']}"
    return text


# ---------------------------------------------------------------- apply (on the host)


def apply(
    file: Path | None = FileOpt,
    host: str | None = typer.Option(None, "--host", help="This host's name in the fleet file."),
    service: list[str] = ServiceOpt,
    drain: bool = typer.Option(False, "--drain", help="Only deployed services that are behind."),
    rev: str | None = typer.Option(None, "--rev", help="Apply this revision (rollback)."),
    pull: bool = typer.Option(False, "--pull", help="git pull --ff-only first."),
    expect: str | None = typer.Option(None, "--expect", help="Revision HEAD must be at."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the actions, change nothing."),
    facts: bool = typer.Option(False, "--facts", help="Print this host's facts as JSON."),
    no_states: bool = typer.Option(
        False, "--no-states", help="With --facts: markers and lock only (what rollback needs)."
    ),
    events: bool = typer.Option(False, "--events", help="Progress as JSON lines (for deploy)."),
    json_out: bool = JsonOpt,
    offline: bool = OfflineOpt,
) -> None:
    """On the host: gates, stop, install, start, health gate, marker; service by service."""
    machine = events or facts
    out = verb_output(offline, json_out or machine)
    emit = _EventWriter() if machine else _human_emit(out)
    if machine:
        # Deploy reads this over ssh: a dropped connection must not kill a half-done apply.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        fleet_file = (file if file is not None else default_fleet_path()).absolute()
        name = host or _this_host(_loaded(fleet_file))
        if facts:
            emit(host_apply.host_report(fleet_file, name, tuple(service), states=not no_states))
            return
        options = host_apply.ApplyOptions(
            host=name,
            services=tuple(service),
            drain=drain,
            revision=rev,
            pull=pull,
            expect=expect,
            dry_run=dry_run,
        )
        result = host_apply.apply(fleet_file, options, emit)
    except FleetError as exc:
        if not machine:
            raise
        emit({"event": "error", **host_apply.failure_json(None, exc)})
        raise typer.Exit(exc.exit_code) from None
    doc = result.to_json()
    if machine:
        emit({"event": "result", "result": doc})
    elif json_out:
        out.emit(doc)
    else:
        _print_apply(out, result)
    if not result.ok:
        contract = result.outcome == host_apply.OUTCOME_CONTRACT_FAILING
        if machine or json_out:
            raise typer.Exit(EXIT_CONTRACT if contract else EXIT_FAILED)
        assert result.failed is not None
        message = result.failed["message"] + (
            f"; pending: {', '.join(result.pending)}" if result.pending else ""
        )
        if contract:
            raise ContractFailingError(
                message, where=result.failed["where"], hint=result.failed["hint"]
            )
        raise RemoteError(
            message,
            where=result.failed["where"],
            hint=result.failed["hint"],
            log_tail=result.failed["log_tail"],
        )


def _this_host(loaded: LoadedFleet) -> str:
    local = [n for n, h in loaded.fleet.hosts.items() if h.is_local(n)]
    if len(local) == 1:
        return local[0]
    raise UsageError(
        "which host is this? the fleet has "
        + ("no local host" if not local else f"several local hosts ({', '.join(local)})"),
        hint="pass --host NAME (deploy does)",
    )


class _EventWriter:
    """JSON lines on stdout; a closed pipe (the deployer went away) silences it, nothing more."""

    def __init__(self) -> None:
        self.closed = False

    def __call__(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            sys.stdout.write(json.dumps(event, default=str) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            self.closed = True


def _human_emit(out: Output) -> Emit:
    def emit(event: dict[str, Any]) -> None:
        kind = event.get("event")
        svc = esc(event.get("service", ""))
        if kind == "step":
            out.note(f"{svc}: {event.get('kind')} {esc(event.get('detail', ''))}")
        elif kind == "health":
            out.note(f"{svc}: health {event.get('state')} after {event.get('seconds', 0):.2f}s")
        elif kind == "contract":
            out.note(_contract_text(event))
        elif kind == "pull":
            out.note(esc(event.get("detail", "")))

    return emit


def _print_apply(out: Output, result: host_apply.ApplyResult) -> None:
    if result.dry_run:
        for action in result.actions:
            out.line(f"{esc(action.service)}: {action.kind:<16} {esc(action.detail)}")
        if not result.actions:
            out.line(f"{esc(result.host)}: nothing to apply at {result.revision[:12]}")
        return
    rows = [
        [
            esc(o.service),
            f"[red]{o.outcome}[/red]" if o.contract == "failing" else o.outcome,
            f"{o.seconds:.2f}s",
        ]
        for o in result.done
    ]
    if result.failed and result.outcome != host_apply.OUTCOME_CONTRACT_FAILING:
        rows.append([esc(result.failed["service"]), "[red]failed[/red]", "-"])
    rows += [[esc(p), "[yellow]pending[/yellow]", "-"] for p in result.pending]
    if rows:
        out.table(
            f"{esc(result.host)} at {result.revision[:12]}", ["service", "result", "took"], rows
        )
        for o in result.done:
            for line in o.evidence:
                out.line(f"  [red]contract[/red] {esc(o.service)}: {esc(line)}")
            if o.restored:
                out.line(f"  {esc(o.service)}: {_restored_text(o.restored)}")
    else:
        kept = [i.service for i in result.plan if i.action == KEEP]
        out.line(
            f"{esc(result.host)}: nothing to apply at {result.revision[:12]}"
            + (f" ({len(kept)} service(s) up to date)" if kept else "")
        )
    for item in result.plan:
        if item.action == HELD:  # left down on purpose: said, never silently skipped
            out.line(f"  {esc(item.service)}: {esc('; '.join(item.reasons))}")


# ---------------------------------------------------------------- rollback


def rollback(
    service: str = typer.Argument(..., help="The service to roll back."),
    to: str | None = typer.Option(None, "--to", help="Revision (default: the one before)."),
    host: str | None = typer.Option(None, "--host", help="Its host, if not in the fleet now."),
    file: Path | None = FileOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Apply one service as of an earlier revision, gated like a deploy."""
    out = Output(json_mode=json_out)
    side = rollout.Fleetside.of(_loaded(file))
    run = rollout.rollback(side, service, to=to, host=host, on_event=_progress(out))
    revision = (run.result or {}).get("revision", to or "")
    _report_runs(out, revision, [run], json_out)
