"""The endpoint contract probe: every check, in an order that feeds the next.

Health first (nothing else means anything on a loading server), then what
the server says about itself (``/v1/models``, ``/props``), then the APIs,
the slot contract (L-25), the features clients build on (L-18, L-44 to
L-46) and ``/metrics`` (L-56). The run returns every result and the
findings a client config is compared against (:mod:`.client_config`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from inferfleet.client.router import ensure_loaded
from inferfleet.client.target import Target
from inferfleet.documents import ProbeCounts, ProbeDocument, ProbeTarget
from inferfleet.errors import FleetError
from inferfleet.io import http
from inferfleet.probe import checks_api, checks_features, checks_slots
from inferfleet.probe.evidence import CheckResult, Exchange, Findings
from inferfleet.probe.session import Session

SCHEMA: Final[Literal["inferfleet.probe/v1"]] = "inferfleet.probe/v1"
OnResult = Callable[[CheckResult], None]


@dataclass(frozen=True)
class ProbeReport:
    target: Target
    checks: list[CheckResult]
    findings: Findings

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def counts(self) -> ProbeCounts:
        def count(status: str) -> int:
            return sum(1 for c in self.checks if c.status == status)

        return {"pass": count("pass"), "fail": count("fail"), "skip": count("skip")}

    def document(self) -> ProbeDocument:
        """The ``inferfleet.probe/v1`` document."""
        t = self.target
        return ProbeDocument(
            schema=SCHEMA,
            target=ProbeTarget(
                label=t.label,
                url=t.base_url,
                service=t.service,
                model=self.findings.model or t.model,
                declared=(
                    {
                        "ctx_per_slot": t.ctx_per_slot,
                        "parallel": t.parallel,
                        **t.client.model_dump(mode="json"),
                    }
                    if t.client is not None
                    else None
                ),
            ),
            ok=self.ok,
            counts=self.counts(),
            checks=[c.to_json() for c in self.checks],
            findings=self.findings.to_json(),
        )


def member_load(base_url: str, model: str) -> CheckResult | None:
    """A router member's cold load as its own result; None on a model already loaded."""
    try:
        cold = ensure_loaded(base_url, model)
    except FleetError as exc:
        return CheckResult("cold-load", "cold load", None, "fail", exc.render())
    if cold is None:
        return None
    return CheckResult(
        "cold-load",
        "cold load",
        None,
        "pass",
        f"{model} was {cold.before}; the router loaded it in {cold.seconds:.2f} s "
        "(its own figure, not in any time to first token below)",
    )


def run_probe(target: Target, *, on_result: OnResult | None = None) -> ProbeReport:
    """Probe ``target``; a bare URL's model id is taken from ``/v1/models`` after health."""
    checks: list[CheckResult] = []

    def add(result: CheckResult) -> None:
        checks.append(result)
        if on_result is not None:
            on_result(result)

    with http.client(timeout=300.0, base_url=target.base_url, key=target.key) as client:
        session = Session(target=target, exchange=Exchange(client), model=target.model)
        add(checks_api.health(session))
        if checks[-1].status == "fail":
            # A loading or absent server answers nothing else meaningfully (L-34).
            return ProbeReport(target, checks, session.findings)
        add(checks_api.models(session))
        if session.model is None:
            return ProbeReport(target, checks, session.findings)
        # A swap group member is loaded (and timed) first, so no timed check waits for it.
        cold = member_load(target.base_url, session.model)
        if cold is not None:
            add(cold)
        checks_api.read_props(session)
        session.draft_counters = checks_api.draft_counters(session)
        for api in ("completions", "chat"):
            add(checks_api.plain(session, api))
            add(checks_api.streamed(session, api))
        add(checks_api.timings(session))
        add(checks_api.draft(session))
        add(checks_slots.context(session))
        add(checks_slots.overflow(session))
        add(checks_slots.concurrency(session))
        add(checks_features.tools(session))
        add(checks_features.reasoning(session))
        add(checks_features.efforts(session))
        add(checks_features.vision(session))
        add(checks_api.metrics(session))
    return ProbeReport(target, checks, session.findings)
