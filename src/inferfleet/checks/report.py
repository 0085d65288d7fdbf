"""A check report as data: the versioned JSON document, SARIF 2.1.0, the catalogue."""

from __future__ import annotations

from typing import Any

from inferfleet.checks.engine import Finding, Report, Rule

SCHEMA = "inferfleet.check/v1"
CATALOGUE_SCHEMA = "inferfleet.check.rules/v1"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LESSONS_URI = "../shared/lessons.md"


# The JSON document's keys, in document order; each is the attribute of that name.
_FINDING_KEYS = (
    "rule",
    "lesson",
    "severity",
    "service",
    "field",
    "line",
    "column",
    "message",
    "hint",
)
_SKIPPED_KEYS = ("rule", "lesson", "subject", "reason")
_RULE_KEYS = ("id", "lesson", "severity", "topic", "needs_header", "title")


def _fields(item: object, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: getattr(item, key) for key in keys}


def finding_dict(finding: Finding) -> dict[str, Any]:
    return _fields(finding, _FINDING_KEYS)


def report_dict(report: Report) -> dict[str, Any]:
    return {
        "file": report.file,
        "ok": not report.errors,
        "rules_run": report.rules_run,
        "counts": {
            "error": len(report.errors),
            "warning": len(report.warnings),
            "skipped": len(report.skipped),
        },
        "findings": [finding_dict(f) for f in report.findings],
        "skipped": [_fields(s, _SKIPPED_KEYS) for s in report.skipped],
    }


def rule_dict(rule: Rule) -> dict[str, Any]:
    return _fields(rule, _RULE_KEYS)


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
