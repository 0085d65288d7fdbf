"""What the fleet status says, as data: one row per service, one per host.

The same objects feed ``inferfleet status`` (table or ``--json``) and the
board's JSON endpoint, so the page and the terminal cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from inferfleet.documents import (
    RevisionInfo,
    StatusDocument,
    StatusHost,
    StatusService,
    document_of,
)
from inferfleet.status.bench import BenchFigures
from inferfleet.status.frontdoor import FrontRow

SCHEMA: Final[Literal["inferfleet.status/v2"]] = "inferfleet.status/v2"

# healthy: its own process answers its health path (L-33); loading: 503 while the
# model loads (L-34); down: nothing answers on a reachable host; stopped: a
# service of this machine that is not running and was never asked to; foreign:
# something else answers on its port (L-33); stale: its record points at a dead
# or reused pid; crash-looping: its unit keeps restarting; unreachable: neither
# ssh nor HTTP reaches its host; unknown: this machine could not read its own
# record of it; contract-failing: healthy, but the last apply's contract probe
# failed (its marker says so, with the evidence) and no apply has passed since;
# held: deliberately held down by an operator (a hold recorded on its host),
# the one state besides healthy that is not a problem.
# The service states themselves are decided in one place,
# inferfleet.deploy.state.decide; this adds what only a remote view has.
STATES = (
    "healthy",
    "contract-failing",
    "loading",
    "unhealthy",
    "down",
    "stopped",
    "held",
    "foreign",
    "stale",
    "crash-looping",
    "unreachable",
    "unknown",
)
# status exits 0 only when every service in scope is healthy or held: a
# declared service that is stopped is a problem like any other.
OK_STATES = frozenset({"healthy", "held"})
PROBLEMS = frozenset(STATES) - OK_STATES

# Deployed revision against HEAD. current: the marker is HEAD; unchanged: an
# older revision, but nothing this service depends on changed since (L-40);
# outdated: its inputs changed, a deploy would restart it; new: never deployed;
# untracked: the fleet is not in a git repository (or not committed);
# unknown: the host's markers could not be read.
REVISION_STATES = ("current", "unchanged", "outdated", "new", "untracked", "unknown")


@dataclass(frozen=True)
class Revision:
    state: str
    deployed: str | None = None
    head: str | None = None
    applied_at: float | None = None
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ServiceRow:
    service: str
    host: str
    kind: str  # llm | container
    runtime: str | None  # llama.cpp | vllm | sglang
    backend: str  # process | systemd | quadlet
    state: str
    url: str  # base URL as this machine reaches it
    links: dict[str, str]
    detail: str = ""  # why it is in this state, when that needs saying
    pid: int | None = None
    pid_source: str | None = None  # record (process backend) | MainPID (systemd)
    uptime_s: float | None = None
    runtime_version: str | None = None
    model: str | None = None
    ctx_per_slot: int | None = None  # as served; the fleet file's when not readable
    parallel: int | None = None  # slots the fleet file declares
    slots: int | None = None  # slots the server runs (declared when not readable)
    busy_slots: int | None = None
    requests_processing: float | None = None
    requests_deferred: float | None = None
    metrics: str = "-"  # ok | off | an error (L-56: 501 means the metrics flag is missing)
    revision: Revision = field(default_factory=lambda: Revision("unknown"))
    bench: BenchFigures | None = None
    notes: list[str] = field(default_factory=list)  # everything else worth knowing
    members: dict[str, str] = field(default_factory=dict)  # a swap group's alias -> state

    @property
    def problem(self) -> bool:
        return self.state in PROBLEMS

    def to_json(self) -> StatusService:
        return document_of(
            StatusService,
            self,
            revision=document_of(RevisionInfo, self.revision),
            bench=None if self.bench is None else self.bench.to_json(),
        )


@dataclass(frozen=True)
class HostRow:
    host: str
    address: str
    local: bool
    reach: str  # local | ssh | http | unreachable | unknown (not asked, nothing read)
    detail: str = ""
    checkout_head: str | None = None  # the revision the host's checkout is at (over ssh)
    lock: str | None = None  # a deploy holding the host's lock
    services: int = 0
    healthy: int = 0
    memory: dict[str, int] = field(default_factory=dict)  # bytes in use: nvidia:0, amd:1, ram

    def to_json(self) -> StatusHost:
        return document_of(StatusHost, self)


@dataclass(frozen=True)
class FleetStatus:
    file: str
    head: str | None  # HEAD of the fleet repository, when it is one
    collected_at: float
    hosts: list[HostRow]
    services: list[ServiceRow]
    notes: list[str] = field(default_factory=list)
    gateway: FrontRow | None = None
    proxy: FrontRow | None = None

    def problems(self) -> list[ServiceRow]:
        return [row for row in self.services if row.problem]

    @property
    def ok(self) -> bool:
        """Every service in scope healthy or held, and the front door too: status exits 0."""
        return not self.problems() and not self.gateway_problem()

    def gateway_problem(self) -> bool:
        """The front door (the gateway, or the auth proxy before it) is not healthy."""
        return (self.gateway is not None and self.gateway.problem) or (
            self.proxy is not None and self.proxy.problem
        )

    def document(self, *, version: str | None = None) -> StatusDocument:
        """The ``inferfleet.status/v2`` document; the board stamps inferfleet's ``version``."""
        doc = StatusDocument(
            schema=SCHEMA,
            ok=self.ok,
            file=self.file,
            head=self.head,
            collected_at=self.collected_at,
            hosts=[h.to_json() for h in self.hosts],
            services=[s.to_json() for s in self.services],
            notes=list(self.notes),
        )
        if self.gateway is not None:
            doc["gateway"] = self.gateway.gateway_json()
        if self.proxy is not None:
            doc["proxy"] = self.proxy.proxy_json()
        if version is not None:
            doc["inferfleet"] = version
        return doc
