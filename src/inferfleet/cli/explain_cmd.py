"""``inferfleet explain L-xx | RULE``: a lesson, what happened, why, what inferfleet does.

A lesson id prints the lesson and every rule of ``check`` that encodes it; a
rule id prints the rule (id, lesson, severity, title) and then its lesson.
An unknown id exits 2 naming the closest ids.
"""

from __future__ import annotations

from typing import Final, Literal

import typer

from inferfleet.checks.engine import Rule, catalogue
from inferfleet.checks.report import rule_document
from inferfleet.cli.fleet_cmds import JsonOpt
from inferfleet.documents import ExplainDocument, LessonText, document_of
from inferfleet.lessons import Lesson, lesson, lesson_id, lessons, unknown
from inferfleet.output import Output, esc

SCHEMA: Final[Literal["inferfleet.explain/v1"]] = "inferfleet.explain/v1"


def explain(
    what: str = typer.Argument(
        ..., metavar="ID", help="A lesson (L-25) or a rule id (see `inferfleet check --list`)."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Explain a lesson (L-25) or a check rule: what happened, why, what inferfleet does."""
    out = Output(json_mode=json_out)
    rules = catalogue()
    by_id = {r.id: r for r in rules}
    asked = by_id.get(what.strip())
    if asked is not None:
        found = lesson(asked.lesson)
    elif lesson_id(what) is not None:
        found = lesson(what)
    else:
        raise unknown(what, [*by_id, *lessons()])
    encoding = [r for r in rules if r.lesson == found.id]
    if json_out:
        out.emit(
            ExplainDocument(
                schema=SCHEMA,
                lesson=document_of(LessonText, found),
                rule=None if asked is None else rule_document(asked),
                rules=[rule_document(r) for r in encoding],
            )
        )
        return
    if asked is not None:
        out.line(
            f"[bold]{esc(asked.id)}[/bold]: {esc(asked.severity)} rule of `inferfleet check` "
            f"(lesson {esc(asked.lesson)})"
        )
        out.line(f"  refuses: {esc(asked.title)}")
        out.line(f"  {esc(waive_hint(asked.id))}")
        out.line("")
    _lesson(out, found, encoding)


def waive_hint(rule_id: str) -> str:
    """How to keep a shape the rule reports on purpose (L-59)."""
    return (
        f"to keep a shape on purpose: under `waivers:` in the fleet file, `- rule: {rule_id}` "
        "with `service:` (or `host:`, `group:`), a `reason:` and optionally `until: YYYY-MM-DD`"
    )


def _lesson(out: Output, found: Lesson, encoding: list[Rule]) -> None:
    out.line(f"[bold]{found.id}[/bold] ({found.kind}): {esc(found.title)}")
    for heading, text in (
        ("What happened", found.happened),
        ("Why", found.why),
        ("What inferfleet does", found.does),
    ):
        out.line("")
        out.line(f"[bold]{heading}[/bold]")
        out.line(f"  {esc(text)}")
    if encoding:
        out.line("")
        out.table(
            f"Rules of `inferfleet check` that encode {found.id}",
            ["rule", "severity", "what it refuses"],
            [[r.id, r.severity, esc(r.title)] for r in encoding],
        )
