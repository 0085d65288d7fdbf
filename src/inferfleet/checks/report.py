"""A check report as data: the versioned JSON document, SARIF 2.1.0, the catalogue."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import quote

from inferfleet.checks.engine import Finding, Report, Rule
from inferfleet.documents import (
    CheckCounts,
    CheckDocument,
    CheckFinding,
    CheckRule,
    CheckRulesDocument,
    CheckSkip,
    document_of,
)
from inferfleet.lessons import lessons

SCHEMA: Final[Literal["inferfleet.check/v1"]] = "inferfleet.check/v1"
CATALOGUE_SCHEMA: Final[Literal["inferfleet.check.rules/v1"]] = "inferfleet.check.rules/v1"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def finding_document(finding: Finding) -> CheckFinding:
    return document_of(CheckFinding, finding)


def report_document(
    report: Report,
    *,
    strict: bool = False,
    require_facts: bool = False,
    notes: list[str] | None = None,
) -> CheckDocument:
    """The ``inferfleet.check/v1`` document; ``ok`` is the verdict the exit code gives."""
    return CheckDocument(
        schema=SCHEMA,
        file=report.file,
        ok=report.passed(strict=strict, require_facts=require_facts),
        rules_run=report.rules_run,
        counts=CheckCounts(
            error=len(report.errors),
            warning=len(report.warnings),
            skipped=len(report.skipped),
            waived=len(report.waived),
            causes=len(report.causes),
        ),
        findings=[finding_document(f) for f in report.findings],
        skipped=[document_of(CheckSkip, s) for s in report.skipped],
        notes=list(notes or []),
    )


def rule_document(rule: Rule) -> CheckRule:
    """One rule of the catalogue as a document part."""
    return document_of(CheckRule, rule)


def catalogue_document(rules: list[Rule]) -> CheckRulesDocument:
    """The ``inferfleet.check.rules/v1`` document: every rule ``check`` runs."""
    return CheckRulesDocument(
        schema=CATALOGUE_SCHEMA,
        rules=[rule_document(rule) for rule in rules],
    )


def sarif(report: Report, rules: list[Rule], version: str) -> dict[str, Any]:
    """SARIF 2.1.0 (validated against the OASIS schema in the tests): code-scanning UIs
    show each finding on its fleet file line, with the rule's lesson as its help.

    The fleet file's URI is relative as given (resolved against the checkout by
    the consumer) or a ``file://`` URI when absolute; lines and columns are
    1-based, columns counted in characters. Rules that could not judge (a
    model file not here) are tool notifications, so a reader sees what was not
    checked.
    """
    index = {rule.id: i for i, rule in enumerate(rules)}
    artifact = {"uri": _uri(report.file)}
    results = []
    for finding in report.findings:
        location: dict[str, Any] = {"artifactLocation": dict(artifact)}
        if finding.line is not None:
            region: dict[str, int] = {"startLine": finding.line}
            if finding.column is not None:
                region["startColumn"] = finding.column
            location["region"] = region
        properties: dict[str, str] = {"lesson": finding.lesson}
        if finding.service is not None:
            properties["service"] = finding.service
        result: dict[str, Any] = {
            "ruleId": finding.rule,
            "ruleIndex": index[finding.rule],
            "level": finding.severity,
            "message": {"text": f"{finding.field}: {finding.message} -- {finding.hint}"},
            "locations": [{"physicalLocation": location}],
            "properties": properties,
        }
        if finding.waived:  # a waiver in the fleet file itself (L-59)
            result["suppressions"] = [
                {"kind": "inSource", "status": "accepted", "justification": finding.reason or ""}
            ]
        results.append(result)
    notifications = [
        {
            "level": "note",
            "message": {"text": f"not checked for {s.subject}: {s.reason}"},
            "associatedRule": {"id": s.rule, "index": index[s.rule]},
        }
        for s in report.skipped
        if s.rule in index
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "inferfleet",
                        "version": version,
                        "rules": [_sarif_rule(rule) for rule in rules],
                    }
                },
                "invocations": [
                    {"executionSuccessful": True, "toolExecutionNotifications": notifications}
                ],
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    """A SARIF reportingDescriptor: the rule, and its lesson as full description and help."""
    described: dict[str, Any] = {
        "id": rule.id,
        "shortDescription": {"text": rule.title},
    }
    lesson = lessons().get(rule.lesson)
    if lesson is not None:
        described["fullDescription"] = {"text": f"{lesson.id}: {lesson.title}"}
        described["help"] = {
            "text": (
                f"{lesson.id}: {lesson.title}\n\nWhat happened: {lesson.happened}\n\n"
                f"Why: {lesson.why}\n\nWhat inferfleet does: {lesson.does}\n\n"
                f"More: inferfleet explain {rule.id}"
            ),
            "markdown": (
                f"**{lesson.id}: {lesson.title}**\n\n**What happened.** {lesson.happened}\n\n"
                f"**Why.** {lesson.why}\n\n**What inferfleet does.** {lesson.does}\n\n"
                f"More: `inferfleet explain {rule.id}`"
            ),
        }
    described["defaultConfiguration"] = {"level": rule.severity}
    described["properties"] = {
        "lesson": rule.lesson,
        "topic": rule.topic,
        "tags": ["inferfleet", rule.topic, rule.lesson],
    }
    return described


def _uri(file: str) -> str:
    """The fleet file as a URI reference: ``file://`` when absolute, else relative, encoded."""
    path = Path(file)
    if path.is_absolute():
        return path.as_uri()
    return quote(path.as_posix())
