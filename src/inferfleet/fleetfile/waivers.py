"""Waivers: a deliberate exception to one ``check`` rule, with its reason.

An operator who runs a shape on purpose (measured, L-59) records it next to
the fleet: the rule id, optionally one subject (a service, a host or a group),
why, and optionally the day it expires. ``check`` applies them
(:mod:`inferfleet.checks.waivers`); a waiver that matches nothing, names an
unknown rule or has expired is itself a warning, so none outlives its reason
unseen.
"""

from __future__ import annotations

import datetime
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from inferfleet.fleetfile.base import Name, Strict, Text

MAX_REASON = 500  # characters: one sentence a reviewer reads, not a document


def _reason(value: str) -> str:
    if not value.strip():
        raise ValueError("a waiver needs a reason (what was measured, or why the shape is wanted)")
    if len(value) > MAX_REASON:
        raise ValueError(f"the reason is {len(value)} characters long; at most {MAX_REASON}")
    return value.strip()


Reason = Annotated[Text, AfterValidator(_reason)]
RuleId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,79}$")]


class Waiver(Strict):
    rule: RuleId
    """The rule id, as `inferfleet check --list` prints it."""
    service: Name | None = None
    """Only this service's findings."""
    host: Name | None = None
    """Only findings on this host or its services."""
    group: Name | None = None
    """Only the findings of this swap group's members."""
    reason: Reason
    """Why the rule does not apply here (kept in the report)."""
    until: datetime.date | None = None
    """The last day the waiver holds (YYYY-MM-DD); after it the rule fires."""

    @model_validator(mode="after")
    def _one_subject(self) -> Waiver:
        given = [k for k in ("service", "host", "group") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(
                f"a waiver names one subject; this one names {' and '.join(given)} "
                "(write one waiver per subject)"
            )
        return self

    @property
    def subject(self) -> str:
        """For messages: "service 'x'", "host 'y'", "group 'z'", or "the whole fleet"."""
        for kind in ("service", "host", "group"):
            value = getattr(self, kind)
            if value is not None:
                return f"{kind} {value!r}"
        return "the whole fleet"
