"""Waivers applied to a report (L-59): a waived finding keeps its place, shown with
the reason, and fails nothing; a waiver that no longer earns its place warns.

The schema is :mod:`inferfleet.fleetfile.waivers`. A waiver matches a finding
of its rule on its subject: a service (the finding names it, or a field under
``services.<name>``), a host (a finding on one of its services or under
``hosts.<name>``), a group (one of its members, or a field under
``groups.<name>``), or, without a subject, every finding of the rule.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Finding, Hit, rule
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.waivers import Waiver

RULE_ID = "waiver-stale"


def _known() -> set[str]:
    from inferfleet.checks.engine import catalogue

    return {r.id for r in catalogue()}


def expired(waiver: Waiver, today: datetime.date) -> bool:
    return waiver.until is not None and waiver.until < today


def _label(index: int, waiver: Waiver) -> str:
    return f"waiver {index + 1} ({waiver.rule} for {waiver.subject})"


@rule(RULE_ID, "L-59", "warning")
def stale(ctx: CheckContext) -> Iterator[Hit]:
    """a waiver names no rule, has expired, or matches no finding (it would hide the next one)"""
    known = _known()
    for index, waiver in enumerate(ctx.fleet.waivers):
        if waiver.rule not in known:
            close = difflib.get_close_matches(waiver.rule, sorted(known), n=1)
            yield Hit(
                None,
                f"waivers[{index}].rule",
                f"{_label(index, waiver)} names no rule of `inferfleet check --list`"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
                "spell the rule id as `inferfleet check --list` prints it, or remove the waiver",
            )
        elif expired(waiver, ctx.today):
            yield Hit(
                None,
                f"waivers[{index}].until",
                f"{_label(index, waiver)} expired on {waiver.until}: the rule fires again",
                "measure again and move `until`, or fix what the rule reports and remove it",
            )
    # A waiver that matches no finding is found once every rule has run (apply).


def _covers(fleet: Fleet, waiver: Waiver, finding: Finding) -> bool:
    if finding.rule != waiver.rule:
        return False
    service = fleet.services.get(finding.service or "")
    if waiver.service is not None:
        return finding.service == waiver.service or _under(finding, "services", waiver.service)
    if waiver.host is not None:
        on_host = service is not None and service.host == waiver.host
        return on_host or _under(finding, "hosts", waiver.host)
    if waiver.group is not None:
        member = service is not None and service.group == waiver.group
        return member or _under(finding, "groups", waiver.group)
    return True


def _under(finding: Finding, section: str, name: str) -> bool:
    prefix = f"{section}.{name}"
    return finding.field == prefix or finding.field.startswith((prefix + ".", prefix + "["))


def apply(
    ctx: CheckContext, findings: list[Finding], ran: set[str]
) -> tuple[list[Finding], list[Hit]]:
    """``findings`` with the waived ones marked, and a stale-waiver hit per waiver that
    matched nothing (only for a rule that ran: a subset run says nothing of the rest)."""
    active = [
        (i, w)
        for i, w in enumerate(ctx.fleet.waivers)
        if w.rule in ran and not expired(w, ctx.today)
    ]
    used: set[int] = set()
    marked: list[Finding] = []
    for finding in findings:
        match = next(((i, w) for i, w in active if _covers(ctx.fleet, w, finding)), None)
        if match is None:
            marked.append(finding)
            continue
        used.add(match[0])
        marked.append(dataclasses.replace(finding, waived=True, reason=match[1].reason))
    stray = [
        Hit(
            None,
            f"waivers[{i}]",
            f"{_label(i, w)} matches no finding: the rule passes there now",
            "remove the waiver (a stale one would silently hide the next real finding)",
        )
        for i, w in active
        if i not in used and RULE_ID in ran
    ]
    return marked, stray
