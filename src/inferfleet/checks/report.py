"""A check report as data: the versioned JSON document, SARIF 2.1.0, the catalogue."""

from __future__ import annotations

from typing import Any, Final, Literal

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

SCHEMA: Final[Literal["inferfleet.check/v1"]] = "inferfleet.check/v1"
CATALOGUE_SCHEMA: Final[Literal["inferfleet.check.rules/v1"]] = "inferfleet.check.rules/v1"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LESSONS_URI = "../shared/lessons.md"


def finding_document(finding: Finding) -> CheckFinding:
    return document_of(CheckFinding, finding)


def report_document(report: Report) -> CheckDocument:
    """The ``inferfleet.check/v1`` document."""
    return CheckDocument(
        schema=SCHEMA,
        file=report.file,
        ok=not report.errors,
        rules_run=report.rules_run,
        counts=CheckCounts(
            error=len(report.errors),
            warning=len(report.warnings),
            skipped=len(report.skipped),
        ),
        findings=[finding_document(f) for f in report.findings],
        skipped=[document_of(CheckSkip, s) for s in report.skipped],
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
    """SARIF 2.1.0: code-scanning UIs show each finding on its fleet file line."""
    index = {rule.id: i for i, rule in enumerate(rules)}
    results = []
    for finding in report.findings:
        location: dict[str, Any] = {"artifactLocation": {"uri": report.file}}
        if finding.line is not None:
            region: dict[str, int] = {"startLine": finding.line}
            if finding.column is not None:
                region["startColumn"] = finding.column
            location["region"] = region
        results.append(
            {
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": finding.severity,
                "message": {"text": f"{finding.field}: {finding.message} -- {finding.hint}"},
                "locations": [{"physicalLocation": location}],
                "properties": {"lesson": finding.lesson, "service": finding.service},
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "inferfleet",
                        "version": version,
                        "informationUri": LESSONS_URI,
                        "rules": [
                            {
                                "id": rule.id,
                                "shortDescription": {"text": rule.title},
                                "helpUri": f"{LESSONS_URI}#{rule.lesson.lower()}",
                                "defaultConfiguration": {"level": rule.severity},
                                "properties": {"lesson": rule.lesson, "topic": rule.topic},
                            }
                            for rule in rules
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
