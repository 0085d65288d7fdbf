"""Documents of ``check``, ``check --list``, ``explain`` and ``secrets scan``."""

from __future__ import annotations

from typing import (
    Literal,
)

from typing_extensions import TypedDict


class CheckFinding(TypedDict):
    rule: str
    lesson: str
    severity: str  # error | warning
    service: str | None
    field: str
    line: int | None
    column: int | None
    message: str
    hint: str
    waived: bool  # a waiver of the fleet file covers it (L-59); it fails nothing
    reason: str | None  # the waiver's reason


class CheckSkip(TypedDict):
    rule: str
    lesson: str
    subject: str
    reason: str
    cause: str  # the missing fact; skips of one cause are reported once


class CheckCounts(TypedDict):
    error: int  # unwaived
    warning: int  # unwaived
    skipped: int
    waived: int
    causes: int  # distinct reasons rules were skipped for


class CheckDocument(TypedDict):
    schema: Literal["inferfleet.check/v1"]
    file: str
    ok: bool
    rules_run: int
    counts: CheckCounts
    findings: list[CheckFinding]
    skipped: list[CheckSkip]
    notes: list[str]  # facts read from the repository (facts/) instead of the files, or why not


class CheckRule(TypedDict):
    id: str
    lesson: str
    severity: str
    topic: str
    needs_header: bool
    title: str


class CheckRulesDocument(TypedDict):
    schema: Literal["inferfleet.check.rules/v1"]
    rules: list[CheckRule]


class LessonText(TypedDict):
    """One operational lesson as users read it (``src/inferfleet/lessons``)."""

    id: str
    kind: str  # check | gate | default | probe | bench
    title: str
    happened: str
    why: str
    does: str


class ExplainDocument(TypedDict):
    """``explain L-xx`` or ``explain RULE``: the lesson, the rule asked for, and every
    rule of ``check`` that encodes the lesson."""

    schema: Literal["inferfleet.explain/v1"]
    lesson: LessonText
    rule: CheckRule | None  # the rule asked for; None when a lesson was asked for
    rules: list[CheckRule]


class SecretFinding(TypedDict):
    path: str
    line: int
    what: str
    redacted: str  # never the secret itself


class SecretsScanDocument(TypedDict):
    schema: Literal["inferfleet.secrets-scan/v1"]
    files: int
    secret_values: int
    findings: list[SecretFinding]
