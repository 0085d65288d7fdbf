"""`inferfleet probe SERVICE|URL`: the endpoint contract, check by check.

Exit status 0 when no check failed, 1 when one did (skips are not
failures), 2 for bad arguments. ``--json`` prints ``inferfleet.probe/v1``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, KeyEnvOpt, key_from_env, resolve_fleet
from inferfleet.client.target import resolve
from inferfleet.errors import EXIT_FAILED
from inferfleet.output import Output, esc
from inferfleet.probe.contract import ProbeReport, run_probe
from inferfleet.probe.evidence import CheckResult

if TYPE_CHECKING:
    from inferfleet.fleetfile.loader import LoadedFleet

STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}


def probe(
    target: str = typer.Argument(..., help="A service of the fleet file, or a base URL."),
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show the evidence of every check, not only failures."
    ),
    key_env: str | None = KeyEnvOpt,
) -> None:
    """Check an endpoint's contract: APIs, slots and window, tools, reasoning, vision, metrics."""
    from inferfleet.deploy.tunnel import reachable

    out = Output(json_mode=json_out)
    loaded: list[LoadedFleet] = []

    def load(path: Path | None) -> LoadedFleet:
        loaded.append(resolve_fleet(path, out, last_up=True))
        return loaded[-1]

    resolved = resolve(target, file, load)
    if key_env is not None:
        resolved = replace(resolved, key=key_from_env(key_env))
    # A service only its host can reach is probed through ssh, never at this machine's
    # own loopback (L-33).
    with reachable(loaded[0] if loaded else None, resolved) as reached:
        model = f" ({esc(reached.model)})" if reached.model else ""
        via = f" ({esc(reached.via)})" if reached.via else ""
        out.note(f"probing {esc(reached.label)} at {esc(reached.base_url)}{via}{model}")

        def progress(result: CheckResult) -> None:
            out.note(f"  [{STYLE[result.status]}]{result.status}[/] {esc(result.title)}")

        report = run_probe(reached, on_result=progress)
    if json_out:
        out.emit(report.document())
    else:
        show(out, report, verbose=verbose)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def show(out: Output, report: ProbeReport, *, verbose: bool) -> None:
    rows = [
        [
            esc(c.title),
            f"[{STYLE[c.status]}]{c.status}[/]",
            c.lesson or "",
            esc(c.summary),
        ]
        for c in report.checks
    ]
    counts = report.counts()
    title = (
        f"probe {esc(report.target.label)}: {counts['pass']} pass, {counts['fail']} fail, "
        f"{counts['skip']} skip"
    )
    out.table(title, ["check", "result", "lesson", "what the server did"], rows)
    for check in report.checks:
        if check.status != "fail" and not verbose:
            continue
        out.line(f"[{STYLE[check.status]}]{check.status}[/] {esc(check.title)}")
        for ev in check.evidence:
            status = "no answer" if ev.status is None else str(ev.status)
            out.line(f"  {esc(ev.request)} {esc(ev.body)}")
            out.line(f"  -> {status} {esc(ev.answer)}")
        if check.hint:
            out.line(f"  hint: {esc(check.hint)}")
    f = report.findings
    facts = [
        ["runtime", esc(f.runtime or "-")],
        ["context per slot", str(f.n_ctx_slot or "-")],
        ["slots", str(f.total_slots or "-")],
        ["reasoning field", esc(f.reasoning_field or "none")],
        ["reasoning_effort map", esc(f.effort_map or "-")],
    ]
    out.table("findings (for client configs)", ["", ""], facts)
