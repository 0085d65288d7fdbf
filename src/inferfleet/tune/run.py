"""`tune` on the real host: price, boot, gate, measure; the service left as it was.

Each candidate is first priced by ``check`` on the fleet with the candidate
applied: a finding the service as declared does not have (the memory fit
of its devices with measured boots where recorded, L-27; a quantised V
cache without flash attention, L-20 ...) keeps it from ever booting. One
that may run is started as a bench arm (the service's own launch through
the one pipeline, its own port, stopped by pid, memory back before the next,
L-43/L-52), health-gated, then its contract is probed against the window
the fleet file promises clients (L-25: a candidate that shrinks it is
rejected with the evidence), and only then measured with the bench's
salted battery at the objective's concurrency.

The production service is stopped for the search when it runs here and is
idle (refused while it serves traffic, unless ``--take-over``), and started
again as it was, health- and contract-gated, whatever happens, Ctrl-C
included.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import psutil

from inferfleet.bench.arms import (
    ArmSpec,
    MemoryNotBackError,
    StartSpec,
    arm_fleet,
    running_pid,
    started,
)
from inferfleet.bench.battery import Battery, load_battery
from inferfleet.bench.campaign import DEFAULT_MEMORY_SLACK, Options, PlannedArm, run_bench
from inferfleet.bench.measure import RequestRecord
from inferfleet.bench.runner import LevelResult, Load
from inferfleet.bench.stats import median
from inferfleet.client.keys import service_key
from inferfleet.client.target import Target
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.tune.search import Abort, Outcome, Rejected, SearchResult, halving
from inferfleet.tune.space import Candidate, Space, apply, candidates

if TYPE_CHECKING:
    import httpx

Note = Callable[[str], None]
BUSY_LOOK_S = 2.0  # how long tokens are watched for traffic before taking a service over


@dataclass(frozen=True)
class Objective:
    name: str  # decode | prefill | ttft | throughput@N
    metric: str  # the figure, in words with its unit
    concurrency: int
    higher_better: bool

    @classmethod
    def parse(cls, text: str) -> Objective:
        if text == "decode":
            return cls(text, "decode tok/s per stream", 1, True)
        if text == "prefill":
            return cls(text, "prefill tok/s", 1, True)
        if text == "ttft":
            return cls(text, "time to first token ms", 1, False)
        if text.startswith("throughput@"):
            number = text.split("@", 1)[1]
            if number.isdigit() and 1 <= int(number) <= 256:
                return cls(text, f"aggregate tok/s at {number} streams", int(number), True)
        raise UsageError(
            f"--objective {text!r} is not one of decode, prefill, ttft, throughput@N",
            hint="e.g. --objective throughput@4 (N concurrent streams, 1-256)",
        )

    def of_run(self, level: LevelResult) -> float | None:
        """The objective's figure of one run (one level of the bench)."""
        good: list[RequestRecord] = [r for r in level.records if r.ok]
        if self.name == "decode":
            return median([r.decode_tps for r in good if r.decode_counted and r.decode_tps])
        if self.name == "prefill":
            return median([r.prefill_tps for r in good if r.prefill_tps])
        if self.name == "ttft":
            return median([r.ttft_ms for r in good if r.ttft_ms is not None])
        return level.aggregate_tps


@dataclass(frozen=True)
class TuneOptions:
    objective: Objective
    budget_s: float
    prompts: int | None = None  # per run (default: one wave at the objective's concurrency)
    max_tokens: int = 128
    take_over: bool = False
    share_device: bool = False
    memory_slack: int = DEFAULT_MEMORY_SLACK
    # Real traffic instead of the battery (bench/replay.py), read and validated once.
    replay: Battery | None = None


@dataclass
class Production:
    """The service as it ran before the search, to be started again after it."""

    pid: int | None
    argv: list[str] = field(default_factory=list)
    restored_pid: int | None = None
    restored_argv: list[str] = field(default_factory=list)
    restore_error: str = ""


@dataclass
class TuneRun:
    service: str
    space: Space
    result: SearchResult
    production: Production
    started_at: float
    finished_at: float = 0.0


def tune(
    loaded: LoadedFleet,
    name: str,
    space: Space,
    options: TuneOptions,
    *,
    note: Note = lambda _text: None,
) -> TuneRun:
    """Search ``space`` for service ``name`` of this machine; the service ends as it began."""
    begun = time.monotonic()  # the budget covers pricing and stopping the service too
    fleet = loaded.fleet
    service = fleet.services[name]
    outcomes = [Outcome(c) for c in candidates(service, space)]
    _price(loaded, name, outcomes, note)
    production = _take_over(loaded, name, options, note)
    run = TuneRun(name, space, _empty(outcomes), production, time.time())
    try:
        run.result = halving(
            outcomes,
            lambda candidate, runs: _measure(loaded, name, candidate, runs, options, note),
            metric=options.objective.metric,
            higher_better=options.objective.higher_better,
            budget_s=options.budget_s,
            started=begun,
        )
    finally:
        _restore(loaded, name, production, note)
        run.finished_at = time.time()
    return run


def _empty(outcomes: list[Outcome]) -> SearchResult:
    return SearchResult(outcomes, interrupted=True)


def _price(loaded: LoadedFleet, name: str, outcomes: list[Outcome], note: Note) -> None:
    """Mark every candidate ``check`` finds something new on as unfit, with the finding."""
    from inferfleet.checks.engine import run_checks
    from inferfleet.install import runtime_flags

    flags = runtime_flags.flag_source()
    service = loaded.fleet.services[name]

    def errors(fleet: LoadedFleet) -> dict[tuple[str, str], str]:
        found = run_checks(fleet, flags=flags).errors
        return {(f.rule, f.message): f"{f.rule} ({f.lesson}): {f.message}" for f in found}

    before = errors(loaded)
    for outcome in outcomes:
        if outcome.candidate.baseline:
            continue
        settings = apply(service, outcome.candidate.as_dict)
        spec = StartSpec(service=name, port=service.port, set=settings)
        try:
            priced, _ = arm_fleet(loaded, spec, outcome.candidate.id)
        except UsageError as exc:
            outcome.status, outcome.reason = "unfit", exc.message
            continue
        new = [text for key, text in errors(priced).items() if key not in before]
        if new:
            outcome.status, outcome.reason = "unfit", new[0]
            note(f"{outcome.candidate.id} ({outcome.candidate.describe()}): not booted: {new[0]}")


def _take_over(loaded: LoadedFleet, name: str, options: TuneOptions, note: Note) -> Production:
    """Stop the production service for the search when it runs here (refused when busy)."""
    from inferfleet.deploy import local

    pid = running_pid(loaded, name)
    if pid is None:
        return Production(None)
    service = loaded.fleet.services[name]
    if service.backend != "process":
        raise UsageError(
            f"service {name!r} runs as a {service.backend} unit (pid {pid})",
            hint=f"stop it for the search (inferfleet stop {name}) and start it after "
            f"(inferfleet start {name})",
        )
    busy = _serving(loaded, name)
    if busy and not options.take_over:
        raise UsageError(
            f"service {name!r} is serving traffic ({busy}); a tune stops it for the search "
            "and would measure against its clients (L-52)",
            hint="run it when the service is idle, or pass --take-over to stop it anyway "
            "(it is started again as it was afterwards)",
        )
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        argv = []
    note(f"stopping {name} (pid {pid}) for the search; it is started again afterwards")
    local.down(loaded, name)
    return Production(pid, argv)


def _serving(loaded: LoadedFleet, name: str) -> str:
    """Why the running service counts as serving traffic, or "" when it is idle."""
    from inferfleet.client import reports
    from inferfleet.io import http

    service = loaded.fleet.services[name]
    key = service_key(loaded, name)
    try:
        with http.client(timeout=5.0, base_url=service.url(), key=key) as client:
            response = client.get("/slots")
            if response.status_code == 200:
                usage = reports.slots(reports.load_json(response.content, "/slots"))
                if usage.busy:
                    return f"{usage.busy} of {usage.total} slots busy"
            first = _predicted(client)
            time.sleep(BUSY_LOOK_S)
            second = _predicted(client)
    except (FleetError, OSError) as exc:
        return f"its slots and metrics could not be read: {exc}"
    if first is not None and second is not None and second > first:
        return f"{second - first:.0f} tokens generated in {BUSY_LOOK_S:.0f} s"
    return ""


def _predicted(client: httpx.Client) -> float | None:
    """Tokens the server generated so far (its /metrics), None when it exports none."""
    from inferfleet.client import reports

    response = client.get("/metrics")
    if response.status_code != 200:
        return None
    values = reports.metrics(response.text)
    return next((v for k, v in values.items() if k.endswith("tokens_predicted_total")), None)


def _measure(
    loaded: LoadedFleet,
    name: str,
    candidate: Candidate,
    runs: int,
    options: TuneOptions,
    note: Note,
) -> list[float]:
    """Boot ``candidate``, gate it, measure ``runs`` runs; the objective per run."""
    from inferfleet.probe.minimal import run_contract

    service = loaded.fleet.services[name]
    settings = apply(service, candidate.as_dict)
    spec = ArmSpec(name=f"tune-{candidate.id}", start=StartSpec(service=name, set=settings))
    battery = load_battery() if options.replay is None else options.replay
    objective = options.objective
    bench = Options(
        concurrency=(objective.concurrency,),
        runs=runs,
        api="chat" if service.client.chat else "completions",
        prompts=tuple(battery.select(None, options.prompts or objective.concurrency)),
        battery=battery,
        # A drafter, or replayed traffic, is measured on text the model would write (L-48);
        # otherwise every token.
        load=Load(
            max_tokens=options.max_tokens,
            ignore_eos=service.speculative is None and options.replay is None,
        ),
        memory_slack=options.memory_slack,
        share_device=options.share_device,
    )
    try:
        with started(
            loaded,
            spec,
            note,
            memory_slack=options.memory_slack,
            share_device=options.share_device,
        ) as arm:
            key = service_key(loaded, name)
            contract = run_contract(
                arm.target.base_url,
                alias=service.model_id(name),
                ctx_per_slot=service.ctx_per_slot,  # the window the fleet file promises (L-25)
                service=f"{name} ({candidate.id})",
                parallel=service.parallel,
                key=key,
            )
            if not contract.ok:
                raise Rejected(f"contract: {'; '.join(contract.evidence)}")
            target = arm.target if key is None else _with_key(arm.target, key)
            result = run_bench([PlannedArm(spec.name, target=target)], bench, loaded=None)
    except MemoryNotBackError as exc:
        raise Abort(exc.render()) from None
    except Rejected:
        raise
    except UsageError:
        raise  # the arm cannot start at all (production, a shared device): not a candidate's
    except FleetError as exc:
        raise Rejected(exc.render()) from None
    if result.interrupted:
        raise KeyboardInterrupt
    failed = [r for r in result.records if not r.ok]
    if failed:
        raise Rejected(f"{len(failed)} request(s) failed: {failed[0].error}")
    values = [objective.of_run(level) for level in result.levels]
    found = [v for v in values if v is not None]
    if len(found) != runs:
        raise Rejected(f"the runs gave no {objective.metric} figure (too few tokens, L-49)")
    return found


def _with_key(target: Target, key: str) -> Target:
    return replace(target, key=key)


def _restore(loaded: LoadedFleet, name: str, production: Production, note: Note) -> None:
    """Start the service again as it ran before the search (gated), when it ran."""
    if production.pid is None:
        return
    from inferfleet.deploy import local

    note(f"starting {name} again as it was")
    try:
        [done] = local.up(loaded, [name], local.Hooks(note=note), contract=True)
    except FleetError as exc:
        production.restore_error = exc.render()
        return
    production.restored_pid = done.pid
    if done.pid is not None:
        try:
            production.restored_argv = psutil.Process(done.pid).cmdline()
        except psutil.Error:
            production.restored_argv = []
    if done.contract == "failing":
        production.restore_error = "started again, but its contract probe fails"


def cpus() -> tuple[int, int]:
    """(physical cores, logical cores) of this machine."""
    logical = os.cpu_count() or 1
    return psutil.cpu_count(logical=False) or logical, logical
