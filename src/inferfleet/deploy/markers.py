"""Revision markers: which revision each service of a host runs (L-41).

One small JSON file per service under ``<state_dir>/markers`` on the host,
outside the checkout, so a ``git clean``, a re-clone or a checkout of another
branch cannot lose or fake it. A marker is written only after the service's
health gate passed; it also remembers the inputs it was deployed with (so a
plan needs no history walk), how it was installed (so a retirement can undo
it) and the revisions it ran before (so a rollback knows where to go).

Since version 2 a marker also says whether the service passed its contract
probe after the health gate (``contract``: passed, failing or skipped, with
the ``contract_evidence`` of a failure). A failing contract still records the
revision (the server runs it, healthy), but the planner redeploys it and
status shows it red until an apply passes. A version 1 marker has neither
field and reads as ``contract: ""`` (not checked), never as failing.

``settings`` lists the settings files rendered for the service (L-54): a
retirement archives and removes them with its units; a marker
written before the field existed reads as none, and those files stay.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.errors import FleetError
from inferfleet.io.state_files import StateFolder

MARKER_VERSION = 2
CONTRACT_PASSED = "passed"
CONTRACT_FAILING = "failing"
CONTRACT_SKIPPED = "skipped"  # not an LLM service, or `up --no-contract`
MAX_EVIDENCE = 20  # lines of evidence kept in a marker
HISTORY = 20  # earlier revisions kept per service, newest first


class MarkerError(FleetError, ValueError):
    """A marker file cannot be read."""


@dataclass(frozen=True)
class Marker:
    service: str
    host: str
    revision: str
    inputs: ServiceInputs
    backend: str  # process | systemd | quadlet
    bind: str
    port: int
    health_path: str
    applied_at: float
    by: str  # user@machine that ran the apply
    unit: str = ""  # systemd unit name (systemd, quadlet)
    scope: str = "system"
    installed: list[str] = field(default_factory=list)  # files to remove on retirement
    healthy_after_s: float | None = None
    history: list[str] = field(default_factory=list)  # earlier revisions, newest first
    version: int = MARKER_VERSION
    contract: str = ""  # passed | failing | skipped; "" in a version 1 marker (not checked)
    contract_evidence: list[str] = field(default_factory=list)  # why it fails, first line first
    # Settings files rendered for it on the host (L-54): archived and removed on retirement.
    settings: list[str] = field(default_factory=list)

    @property
    def contract_failing(self) -> bool:
        return self.contract == CONTRACT_FAILING

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["inputs"] = self.inputs.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Marker:
        """A marker from a host's report (files are read by :meth:`MarkerStore.read`)."""
        try:
            fields = dict(data)
            fields["inputs"] = ServiceInputs.from_json(fields.get("inputs") or {})
            return cls(**fields)
        except (TypeError, ValueError, AttributeError) as exc:
            raise MarkerError(
                f"a revision marker in the host's report has an unexpected shape ({exc})",
                hint="run the same inferfleet version on both machines; delete a damaged "
                "marker on the host to have the service redeployed",
            ) from None

    def succeeded_by(self, new: Marker) -> Marker:
        """``new`` with this marker's revision pushed onto its history."""
        history = [self.revision, *self.history]
        if self.revision == new.revision:
            history = list(self.history)
        return replace(new, history=history[:HISTORY])


class MarkerStore(StateFolder[Marker]):
    shape = Marker
    subfolder = "markers"
    what = "revision marker"
    error = MarkerError
    fix = "delete it; the next deploy then treats the service as new and redeploys it"

    def write(self, value: Marker) -> Path:
        """Record ``value`` atomically (temp file + rename), keeping the history."""
        previous = self.read(value.service)
        return super().write(value if previous is None else previous.succeeded_by(value))
