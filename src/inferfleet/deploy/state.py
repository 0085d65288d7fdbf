"""A service's state on its host: facts read as data, and the one function that decides.

pyinfra's idea of a fact: gathering (files, the process record, systemctl,
the port, one health request) happens in :mod:`inferfleet.deploy.facts`;
everything here is plain data and a pure decision, so every combination (a
stale record, a foreign process on the port, a crash-looping unit) is tested
from captured readings. ``status``, ``up``, ``apply``, the board and the deploy
gates all read :func:`decide`'s answer; nothing else decides "is it up?".

Cheap to import: the deploying side parses a host's JSON report with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# One progress event of an apply: {"event": "step" | "health" | "done" | ..., ...}.
Emit = Callable[[dict[str, Any]], None]

STOPPED = "stopped"  # nothing of this service runs
LOADING = "loading"  # its own process answers 503 while it loads the model (L-34)
HEALTHY = "healthy"  # 200 from its own process (L-33)
UNHEALTHY = "unhealthy"  # its process runs but does not answer 200 or 503
STALE = "stale"  # a record names a pid that is gone or now belongs to another program
FOREIGN = "foreign"  # another process answers on its port (L-33, L-35)
CRASH_LOOPING = "crash-looping"  # its unit keeps restarting (L-33)
STATES = (STOPPED, LOADING, HEALTHY, UNHEALTHY, STALE, FOREIGN, CRASH_LOOPING)
# A unit that restarted this often since it was last started is crash-looping.
CRASH_RESTARTS = 3


@dataclass(frozen=True)
class RecordFact:
    """The process backend's record of the service, and what its pid is now."""

    pid: int
    same_process: bool  # the pid still runs the process that was started (pid + start time)
    now_running: str  # the program that has that pid now ("" when none does)
    spec: str
    bind: str
    port: int
    health_path: str
    started_at: float
    runtime_version: str = ""
    # Recorded while its health gate runs (no healthy_after_s yet): a server that refuses
    # connections then is still starting, as vLLM does for its whole load (L-34).
    starting: bool = False


@dataclass(frozen=True)
class UnitFact:
    """``systemctl show`` of the service's unit in one scope."""

    active: str
    sub: str
    main_pid: int
    restarts: int = 0

    @property
    def running(self) -> bool:
        return self.active == "active" and self.sub == "running" and self.main_pid > 0

    def describe(self) -> str:
        return f"{self.active}/{self.sub}"


@dataclass(frozen=True)
class HealthFact:
    """One health request to the service's port, and who listens there."""

    url: str
    answer: str  # ok | loading | down | error (backends.health.Probe.state)
    status: int | None
    listeners: list[int] = field(default_factory=list)  # pids listening on the port
    owned: bool = False  # the listening socket belongs to the service's own process tree
    holder: str = ""  # "pid N (cmdline)" of a listener that is not the service's


@dataclass(frozen=True)
class ServiceFacts:
    """Everything read about one service on its host, before any decision."""

    service: str
    record: RecordFact | None = None
    units: dict[str, UnitFact] = field(default_factory=dict)  # "scope:unit" -> show
    files: dict[str, str] = field(default_factory=dict)  # installed path -> sha256
    health: HealthFact | None = None
    # Settings files rendered on the host from their templates (L-54): dest ->
    # sha256 of the rendered content (what should be installed; ``files`` has
    # what is). A difference makes the service be re-applied.
    settings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceState:
    service: str
    pid: int | None = None  # its own process: the recorded pid, or the unit's MainPID
    process_spec: str | None = None  # spec of the recorded process, while it runs
    units: dict[str, str] = field(default_factory=dict)  # "scope:unit" -> "active/sub"
    files: dict[str, str] = field(default_factory=dict)  # installed path -> sha256
    healthy: bool = False  # answered 200 from its own process when the facts were read
    state: str = STOPPED  # one of STATES
    detail: str = ""  # why, in one line
    started_at: float | None = None  # of the recorded process
    runtime_version: str = ""
    settings: dict[str, str] = field(default_factory=dict)  # dest -> rendered sha256 (L-54)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServiceState:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def settings_status(self, dest: str) -> str:
        """``unchanged``, ``changed`` or ``new``: a rendered settings file against the installed."""
        installed = self.files.get(dest)
        if installed is None:
            return "new"
        return "unchanged" if installed == self.settings.get(dest) else "changed"

    @property
    def stale_settings(self) -> list[str]:
        """Settings files whose rendered content is not what is installed (L-54)."""
        return sorted(d for d in self.settings if self.settings_status(d) != "unchanged")

    def unit_running(self, scope: str, unit: str) -> bool:
        return self.units.get(f"{scope}:{unit}", "").startswith("active/running")

    @property
    def running(self) -> bool:
        """Its own process runs (whatever it answers)."""
        return self.pid is not None


def decide(facts: ServiceFacts) -> ServiceState:
    """The service's state from its facts: the only place that decides it."""
    record = facts.record
    units = {key: unit.describe() for key, unit in facts.units.items()}
    pid: int | None = None
    spec: str | None = None
    started_at: float | None = None
    version = ""
    if record is not None and record.same_process:
        pid, spec, started_at, version = (
            record.pid,
            record.spec,
            record.started_at,
            record.runtime_version,
        )
    if pid is None:
        pid = next((u.main_pid for _, u in sorted(facts.units.items()) if u.running), None)
    health = facts.health

    def state(name: str, detail: str = "", healthy: bool = False) -> ServiceState:
        return ServiceState(
            facts.service,
            pid,
            spec,
            units,
            dict(facts.files),
            healthy,
            name,
            detail,
            started_at,
            version,
            dict(facts.settings),
        )

    looping = [
        (key, u)
        for key, u in sorted(facts.units.items())
        if u.sub == "auto-restart" or (u.restarts >= CRASH_RESTARTS and not u.running)
    ]
    if pid is None:
        if looping:
            key, unit = looping[0]
            return state(
                CRASH_LOOPING,
                f"{key} restarted {unit.restarts} time(s) and is {unit.describe()}",
            )
        if health is not None and health.listeners:
            return state(FOREIGN, f"port held by {health.holder or 'another process'} (L-35)")
        if record is not None and not record.same_process:
            gone = f"now belongs to {record.now_running!r}" if record.now_running else "is gone"
            return state(STALE, f"recorded pid {record.pid} {gone}")
        return state(STOPPED, "not running")
    if health is None:
        return state(UNHEALTHY, "its health was not read")
    if health.answer in {"ok", "loading"} and not health.owned:
        holder = health.holder or "another process"
        return state(FOREIGN, f"port answered by {holder}, not pid {pid} (L-33)")
    if health.answer == "ok":
        return state(HEALTHY, healthy=True)
    if health.answer == "loading":
        return state(LOADING, "loading the model (503)")
    if health.answer == "down" and record is not None and record.starting:
        return state(LOADING, "starting: not listening yet, its health gate runs (L-34)")
    if health.answer == "down":
        return state(UNHEALTHY, f"pid {pid} runs but {health.url} does not answer")
    return state(UNHEALTHY, f"{health.url} answered HTTP {health.status}")
