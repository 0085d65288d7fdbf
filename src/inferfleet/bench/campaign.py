"""A whole benchmark: arms one after the other, runs, concurrency levels.

Arms run strictly one at a time, so a started server never competes with
another arm's (L-52). Within an arm the runs are the outer loop: each run
goes through every concurrency level, so the run-to-run spread that the
verdicts use (L-48) includes drift over time, not just adjacent requests.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inferfleet.bench.arms import ArmRun, ArmSpec, MemoryNotBackError, started
from inferfleet.bench.battery import Battery, Prompt
from inferfleet.bench.measure import RequestRecord
from inferfleet.bench.runner import (
    Endpoint,
    Interrupted,
    LevelResult,
    Load,
    detect_runtime,
    draft_counters,
    plan_requests,
    request_extra,
    run_level,
    warm_up,
)
from inferfleet.client.router import ColdLoad, ensure_loaded
from inferfleet.client.stream import Api
from inferfleet.client.target import Target, with_model
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.loader import LoadedFleet

Note = Callable[[str], None]
# (arm, run, concurrency, requests in the level): a level starts (progress bars).
OnLevel = Callable[[str, int, int, int], None]
DEFAULT_MEMORY_SLACK = 256 << 20


@dataclass(frozen=True)
class PlannedArm:
    name: str
    target: Target | None = None  # an endpoint that is already running
    start: ArmSpec | None = None  # a server the bench starts and stops itself


@dataclass(frozen=True)
class Options:
    concurrency: tuple[int, ...]
    runs: int
    api: Api
    prompts: tuple[Prompt, ...]
    battery: Battery
    load: Load = Load()
    memory_slack: int = DEFAULT_MEMORY_SLACK
    warmup: bool = True
    share_device: bool = False  # start arms next to other services on their device (L-52)

    def validate(self) -> None:
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise UsageError("concurrency levels must be whole numbers >= 1", hint="e.g. 1,2,4")
        if self.runs < 1:
            raise UsageError("--runs must be at least 1", hint="use 3 or more for verdicts")
        if self.load.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1", hint="use 128 or more (L-49)")


@dataclass
class BenchResult:
    options: Options
    started_at: float
    finished_at: float = 0.0
    arms: list[ArmRun] = field(default_factory=list)
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    levels: list[LevelResult] = field(default_factory=list)
    aborted: str | None = None
    interrupted: bool = False  # Ctrl-C: what finished before it is kept
    cold_loads: dict[str, ColdLoad] = field(default_factory=dict)  # arm -> a member's load

    @property
    def records(self) -> list[RequestRecord]:
        return [r for level in self.levels for r in level.records]


def run_bench(
    arms: list[PlannedArm],
    options: Options,
    *,
    loaded: LoadedFleet | None,
    note: Note = lambda _text: None,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_level: OnLevel | None = None,
) -> BenchResult:
    options.validate()
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise UsageError(f"arm names must be unique: {names}", hint="rename one of the arms")
    result = BenchResult(options, started_at=time.time())
    for arm in arms:
        try:
            with _arm(arm, loaded, note, options) as run:
                result.arms.append(run)
                _measure(run, options, result, note, on_record, on_level)
        except (Interrupted, KeyboardInterrupt) as exc:
            # Ctrl-C keeps what was measured (a started arm's server is stopped on the way
            # out of its `with`); the summary says where it stopped.
            if isinstance(exc, Interrupted) and exc.level.records:
                result.levels.append(exc.level)
            result.interrupted = True
            result.aborted = f"arm {arm.name}: interrupted (Ctrl-C); what finished before is kept"
            break
        except MemoryNotBackError as exc:
            result.aborted = exc.render()
            break
        except FleetError as exc:
            if not result.levels:
                raise
            # Keep what was measured; the summary says where and why it stopped.
            result.aborted = f"arm {arm.name}: {exc.render()}"
            break
    result.finished_at = time.time()
    return result


@contextlib.contextmanager
def _arm(
    arm: PlannedArm, loaded: LoadedFleet | None, note: Note, options: Options
) -> Iterator[ArmRun]:
    if arm.start is not None:
        if loaded is None:
            raise UsageError(
                f"arm {arm.name!r} starts a server, which needs a fleet file", hint="pass --file"
            )
        with started(
            loaded,
            arm.start,
            note,
            memory_slack=options.memory_slack,
            share_device=options.share_device,
        ) as run:
            yield run
        return
    assert arm.target is not None
    yield ArmRun(arm.name, "running", arm.target)


def _measure(
    run: ArmRun,
    options: Options,
    result: BenchResult,
    note: Note,
    on_record: Callable[[RequestRecord], None] | None,
    on_level: OnLevel | None = None,
) -> None:
    target = with_model(run.target)
    runtime = detect_runtime(target.base_url, key=target.key)
    assert target.model is not None
    endpoint = Endpoint(
        arm=run.name,
        base_url=target.base_url,
        model=target.model,
        api=options.api,
        runtime=runtime,
        extra=request_extra(runtime),
        key=target.key,
    )
    result.endpoints[run.name] = endpoint
    prompts = list(options.prompts)
    # A swap group member's load is its own figure, never part of a warm request's TTFT.
    cold = ensure_loaded(target.base_url, target.model, timeout_s=options.load.timeout_s)
    if cold is not None:
        result.cold_loads[run.name] = cold
        note(f"{run.name}: {cold.model} was {cold.before}; cold load {cold.seconds:.2f} s")
    if options.warmup:
        warm_up(endpoint, prompts[0], timeout_s=options.load.timeout_s)
    for number in range(1, options.runs + 1):
        for concurrency in options.concurrency:
            if on_level is not None:
                on_level(run.name, number, concurrency, len(plan_requests(prompts, concurrency)))
            else:
                note(f"{run.name}: run {number}/{options.runs}, concurrency {concurrency}")
            counted = draft_counters(endpoint) if endpoint.runtime != "llama.cpp" else None
            level = run_level(
                endpoint, prompts, concurrency, run=number, load=options.load, on_record=on_record
            )
            after = draft_counters(endpoint) if counted is not None else None
            if counted is not None and after is not None:
                level.server_draft = (after[0] - counted[0], after[1] - counted[1])
            result.levels.append(level)
