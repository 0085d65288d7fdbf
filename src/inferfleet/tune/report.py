"""A tune's result as a change: the document, the table, the plot and the fleet file edit.

The document (``inferfleet.tune/v1``) holds every candidate with its
settings, why it was not booted or was rejected, and its figure per run;
the verdict only beyond the run-to-run noise (L-48). ``--write`` sets the
winner's keys in the fleet file in place (comments and layout kept) with a
comment that cites the measurement: date, figure, spread, baseline, noise.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from inferfleet import __version__
from inferfleet.bench.stats import Spread
from inferfleet.documents import TuneCandidate, TuneDocument, TuneWinner
from inferfleet.fleetfile.service import Service
from inferfleet.io.files import atomic_write
from inferfleet.tune.run import TuneOptions, TuneRun
from inferfleet.tune.search import Outcome
from inferfleet.tune.space import KNOBS, FieldKnob, apply


def _stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _candidate(outcome: Outcome) -> TuneCandidate:
    spread = Spread.of(outcome.runs)
    return {
        "id": outcome.candidate.id,
        "baseline": outcome.candidate.baseline,
        "settings": {k: v for k, v in outcome.candidate.settings},
        "status": outcome.status,
        "reason": outcome.reason,
        "runs": outcome.runs,
        "median": spread.median,
        "min": spread.min,
        "max": spread.max,
        "rung": outcome.rung,
        "seconds": round(outcome.seconds, 1),
    }


def document(run: TuneRun, options: TuneOptions) -> TuneDocument:
    result = run.result
    objective = options.objective
    verdict = result.verdict
    winner: TuneWinner | None = None
    if result.winner is not None and verdict is not None:
        winner = {
            "id": result.winner.candidate.id,
            "settings": {k: v for k, v in result.winner.candidate.settings},
            "median": verdict.median_b,
            "baseline_median": verdict.median_a,
            "diff_pct": verdict.diff_pct,
            "noise_pct": verdict.noise_pct,
        }
    counts: dict[str, int] = {}
    for outcome in result.outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    production = run.production
    return {
        "schema": "inferfleet.tune/v1",
        "inferfleet": __version__,
        "service": run.service,
        "objective": objective.name,
        "metric": objective.metric,
        "higher_better": objective.higher_better,
        "concurrency": objective.concurrency,
        "started_at": _stamp(run.started_at),
        "finished_at": _stamp(run.finished_at),
        "budget_s": options.budget_s,
        "elapsed_s": round(run.finished_at - run.started_at, 1),
        "space": {k: list(v) for k, v in run.space.knobs.items()},
        "candidates": [_candidate(o) for o in result.outcomes],
        "counts": counts,
        "rungs": result.rungs,
        "stopped_by_budget": not result.budget_left,
        "aborted": result.aborted or None,
        "interrupted": result.interrupted,
        "verdict": verdict.verdict if verdict is not None else None,
        "winner": winner,
        "restored": None
        if production.pid is None
        else {
            "pid_before": production.pid,
            "pid": production.restored_pid,
            "same_argv": bool(production.argv) and production.argv == production.restored_argv,
            "error": production.restore_error or None,
        },
    }


def conclusion(doc: TuneDocument) -> str:
    """One sentence: the winner with its margin, or why there is none."""
    winner = doc["winner"]
    if winner is not None:
        shown = ", ".join(f"{k}={v}" for k, v in winner["settings"].items())
        return (
            f"{shown}: {winner['median']} against {winner['baseline_median']} as declared "
            f"({winner['diff_pct']:+.1f} %, beyond the {winner['noise_pct']:.1f} % run-to-run "
            "noise)"
        )
    if doc["aborted"]:
        return f"no verdict: {doc['aborted']}"
    verdict = doc["verdict"]
    if verdict is not None and verdict.startswith("no verdict"):
        return f"{verdict} (the best challenger against the baseline)"
    if verdict is not None:
        return f"no better setting: the best challenger is {verdict} of the baseline"
    if doc["interrupted"]:
        return "no verdict: interrupted before a challenger was measured twice"
    return "no verdict: the budget ended before a challenger was measured against the baseline"


def write_results(folder: Path, doc: TuneDocument) -> list[Path]:
    """summary.json, table.md and (with matplotlib) the plot, into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "summary.json", folder / "table.md"]
    atomic_write(written[0], json.dumps(doc, indent=2) + "\n")
    atomic_write(written[1], table_markdown(doc))
    plot = folder / "objective.png"
    if draw(doc, plot):
        written.append(plot)
    return written


def table_markdown(doc: TuneDocument) -> str:
    knobs = sorted(doc["space"])
    head = ["candidate", *knobs, "status", doc["metric"], "runs", "why"]
    lines = [
        f"# tune {doc['service']}: {doc['objective']} ({doc['started_at']})",
        "",
        conclusion(doc),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for c in doc["candidates"]:
        values = [str(c["settings"].get(k, "default") or "default") for k in knobs]
        runs = ", ".join(f"{v:g}" for v in c["runs"])
        row = [c["id"], *values, c["status"], str(c["median"] or "-"), runs, c["reason"]]
        lines.append("| " + " | ".join(x.replace("|", "/") for x in row) + " |")
    return "\n".join(lines) + "\n"


def draw(doc: TuneDocument, path: Path) -> bool:
    """The objective against each knob (one panel per knob); False without matplotlib."""
    from inferfleet.bench.plots import pyplot

    plt = pyplot()
    measured = [c for c in doc["candidates"] if c["status"] == "measured" and c["median"]]
    if plt is None or not measured:
        return False
    knobs = sorted(doc["space"])
    fig, axes = plt.subplots(1, len(knobs), figsize=(3.6 * len(knobs), 3.4), dpi=110)
    axes = axes if len(knobs) > 1 else [axes]
    for ax, knob in zip(axes, knobs, strict=True):
        labels = [str(v) for v in doc["space"][knob]]
        for c in measured:
            value = str(c["settings"].get(knob))
            x = labels.index(value) if value in labels else len(labels)
            middle = c["median"] or 0.0
            low, high = c["min"] or middle, c["max"] or middle
            ax.errorbar(
                [x],
                [middle],
                yerr=[[middle - low], [high - middle]],
                fmt="*" if c["baseline"] else "o",
                markersize=11 if c["baseline"] else 5,
                color="black" if c["baseline"] else None,
                alpha=0.85,
            )
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel(knob)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(doc["metric"])
    fig.suptitle(
        f"tune {doc['service']}: each candidate's median, min-max of its runs (* declared)"
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def edits(
    service_name: str, service: Service, winner: dict[str, Any], baseline: dict[str, Any]
) -> dict[tuple[str, ...], Any]:
    """The fleet file keys the winner changes: (services, NAME, key...) -> value; only the
    knobs whose value differs from the service as declared."""
    settings = {k: v for k, v in winner.items() if v != baseline.get(k)}
    changed = apply(service, settings)
    out: dict[tuple[str, ...], Any] = {}
    for knob in settings:
        spec = KNOBS[knob]
        if isinstance(spec, FieldKnob):
            node: Any = changed
            for part in spec.path:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                out[("services", service_name, *spec.path)] = node
    if "extra_args" in changed:
        out[("services", service_name, "extra_args")] = changed["extra_args"]
    return out


def comment(doc: TuneDocument) -> str:
    """The comment beside each key ``--write`` sets: the measurement it rests on."""
    winner = doc["winner"]
    assert winner is not None
    day = doc["started_at"][:10]
    return (
        f"inferfleet tune {day}: {doc['metric']} {winner['median']} vs {winner['baseline_median']} "
        f"as declared ({winner['diff_pct']:+.1f} %, noise {winner['noise_pct']:.1f} %)"
    )
