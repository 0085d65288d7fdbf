"""The search: successive halving over candidates, within a time budget, never on one run.

Rung 0 measures every candidate that may run with one short run; each next
rung keeps the better half and measures it again with one run more (up to
``max_runs``), on a fresh boot each time, so warm caches and a lucky run do
not decide (L-47, L-48). The baseline (the service as declared) is measured
in every rung beside the survivors. The search ends when one challenger is
left and has at least two runs, or when the next measurement (in rung 0) or
the next whole rung (later) would not fit the time budget; the result says
how far it got.

The winner is the challenger only when it beats the baseline by more than
the run-to-run noise of both (``bench.stats.compare``); otherwise the honest
answer is "no better setting".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from inferfleet.bench.stats import Verdict, compare, median
from inferfleet.tune.space import Candidate

MAX_RUNS = 3


class Rejected(Exception):
    """A candidate that booted but may not be used (its contract failed, it did not
    become healthy): the reason is kept with it."""


class Abort(Exception):
    """Later measurements could not be believed (memory did not come back, L-52)."""


@dataclass
class Outcome:
    """What happened to one candidate."""

    candidate: Candidate
    status: str = "not reached"  # measured | rejected | unfit | not reached
    reason: str = ""
    runs: list[float] = field(default_factory=list)  # the objective per run (last rung)
    rung: int = -1  # the last rung it was measured in
    seconds: float = 0.0  # spent on it, boots included

    @property
    def score(self) -> float | None:
        return median(self.runs)


@dataclass
class SearchResult:
    outcomes: list[Outcome]
    rungs: int = 0
    budget_left: bool = True  # False: stopped by the time budget
    aborted: str = ""
    interrupted: bool = False
    verdict: Verdict | None = None
    winner: Outcome | None = None

    @property
    def baseline(self) -> Outcome:
        return self.outcomes[0]


# (candidate, runs) -> the objective per run; raises Rejected or Abort.
Measure = Callable[[Candidate, int], list[float]]


def halving(
    outcomes: list[Outcome],
    measure: Measure,
    *,
    metric: str,
    higher_better: bool,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
    started: float | None = None,
    max_runs: int = MAX_RUNS,
) -> SearchResult:
    """Run the search over ``outcomes`` (the baseline first; unfit ones are skipped).

    ``started``: when the budget began on ``clock`` (default: now); the pricing
    and stopping the production service before the search count too.
    """
    started = clock() if started is None else started
    result = SearchResult(outcomes)
    per_run: list[float] = []  # seconds one run of one candidate took, boots included
    alive = [o for o in outcomes if o.status != "unfit"]
    if not alive or not alive[0].candidate.baseline:
        raise ValueError("the baseline must come first and may run")
    rung = 0
    try:
        while True:
            runs = min(rung + 1, max_runs)
            # A later rung compares the survivors with the baseline measured in the same
            # rung: it is started only when all of it fits, never the baseline alone (that
            # would replace the runs the survivors are compared with).
            if rung > 0 and _over(clock() - started, per_run, runs * len(alive), budget_s):
                result.budget_left = False
                return _decide(result, metric, higher_better)
            result.rungs = rung + 1
            for outcome in alive:
                if rung == 0 and _over(clock() - started, per_run, runs, budget_s):
                    result.budget_left = False
                    return _decide(result, metric, higher_better)
                begun = clock()
                try:
                    values = measure(outcome.candidate, runs)
                except Rejected as exc:
                    outcome.status, outcome.reason = "rejected", str(exc)
                    outcome.seconds += clock() - begun
                    if outcome.candidate.baseline:
                        result.aborted = f"the service as declared was rejected: {exc}"
                        return result
                    continue
                spent = clock() - begun
                outcome.seconds += spent
                per_run.append(spent / runs)
                outcome.status, outcome.runs, outcome.rung = "measured", values, rung
            baseline, challengers = alive[0], [o for o in alive[1:] if o.status == "measured"]
            if len(challengers) <= 1 and runs >= 2:
                return _decide(result, metric, higher_better)
            if not challengers:
                return _decide(result, metric, higher_better)
            challengers.sort(key=lambda o: _key(o, higher_better))
            alive = [baseline, *challengers[: max(1, math.ceil(len(challengers) / 2))]]
            rung += 1
    except Abort as exc:
        result.aborted = str(exc)
        return _decide(result, metric, higher_better)
    except KeyboardInterrupt:
        result.interrupted = True
        return _decide(result, metric, higher_better)


def _over(spent: float, per_run: list[float], runs: int, budget_s: float) -> bool:
    """Whether ``runs`` more runs, at the median seconds a run took so far, overrun the budget."""
    return spent + (median(per_run) or 0.0) * runs > budget_s


def _key(outcome: Outcome, higher_better: bool) -> float:
    score = outcome.score
    if score is None:
        return math.inf
    return -score if higher_better else score


def _decide(result: SearchResult, metric: str, higher_better: bool) -> SearchResult:
    """The best challenger of the last rung it reached, against the baseline's runs."""
    baseline = result.baseline
    measured = [
        o
        for o in result.outcomes[1:]
        if o.status == "measured" and o.runs and o.rung == baseline.rung
    ]
    if baseline.status != "measured" or not measured:
        return result
    best = min(measured, key=lambda o: _key(o, higher_better))
    verdict = compare(metric, "baseline", baseline.runs, best.candidate.id, best.runs)
    result.verdict = verdict
    better = "b higher" if higher_better else "b lower"
    if verdict.verdict == better:
        result.winner = best
    return result
