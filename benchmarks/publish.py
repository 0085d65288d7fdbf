"""Run the benchmarks and publish their figures: docs/benchmarks/<name>.json and .png, and the
handbook's benchmarks page (docs/benchmarks.md): its table between
``<!-- benchmarks:start -->`` and ``<!-- benchmarks:end -->``.

    .venv/bin/python benchmarks/publish.py                  # run every benchmark, then publish
    .venv/bin/python benchmarks/publish.py --only cli_startup
    .venv/bin/python benchmarks/publish.py --from-results   # publish what benchmarks/results holds

Benchmarks run one after the other (they measure the machine; two at once
would measure each other) with the modest arguments in :data:`BENCHMARKS`.
One that cannot run here (no root for the test hosts, no llama-server, no
reference client) is published as *not run* with the reason, never with
made-up figures. Every input is read and validated and every output
rendered in memory before the first file is written, and each file is
replaced atomically: a malformed results file stops the run with its name
and leaves docs/ and the benchmarks page as they were.

The page's section is a pure function of docs/benchmarks/*.json
(:func:`render_section`), so a test can check that the committed table is the
one the committed figures give. The plots are drawn with matplotlib's Agg
backend at a fixed size and dpi, with no software or date in the PNG's
metadata: the same figures give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import results
from results import ROOT, ResultsError, Row, atomic_write, dump, fmt, load, rows_of, skipped

from inferfleet.errors import FleetError

DOCS = ROOT / "docs" / "benchmarks"
README = ROOT / "docs" / "benchmarks.md"  # the handbook page that holds the table
START = "<!-- benchmarks:start -->"
END = "<!-- benchmarks:end -->"


def _needs_root() -> str | None:
    if os.geteuid() != 0:
        return "needs root for the test hosts (network namespaces)"
    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        return "needs openssh-server for the test hosts"
    return None


def _needs_llama_server() -> str | None:
    from inferfleet import paths

    built = paths.cache_dir() / "runtimes" / "llama.cpp"
    if not built.is_dir() or not any(built.iterdir()):
        return f"needs the built llama-server under {built} (run the tests once to build it)"
    return None


def _needs_aiperf() -> str | None:
    from inferfleet import paths

    home = paths.cache_dir() / "bench-ref"
    if not any(home.glob("aiperf-*/bin/aiperf")):
        return (
            f"the reference client (aiperf) is not installed under {home}; "
            "run benchmarks/bench_vs_reference.py once by hand to install it"
        )
    return None


def _needs(*tools: str) -> Callable[[], str | None]:
    def check() -> str | None:
        missing = [t for t in tools if shutil.which(t) is None]
        return f"needs {', '.join(missing)} on PATH" if missing else None

    return check


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    args: tuple[str, ...]
    precondition: Callable[[], str | None] | None = None


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("cli_startup", "CLI start-up", ("--runs", "10")),
    Benchmark("check_offline", "`check` without the network", ("--runs", "5")),
    Benchmark("gguf_inspect", "GGUF header reads", ("--runs", "5")),
    Benchmark("gguf_fuzz", "GGUF reader fuzz run", ("--cases", "20000")),
    Benchmark("fleet_fuzz", "Fleet loader fuzz run", ("--minutes", "1")),
    Benchmark(
        "fetch_verify",
        "Fetch and verify throughput",
        ("--copies", "2"),
        _needs("curl", "sha256sum"),
    ),
    Benchmark("deploy_overhead", "Deploy and plan overhead", ("--runs", "7"), _needs_root),
    Benchmark("up_overhead", "`up` over a bare llama-server", ("--runs", "5"), _needs_llama_server),
    Benchmark("first_build", "The first `up`'s llama-server build", (), _needs("c++")),
    Benchmark(
        "front_door",
        "Front door: gateway and auth proxy hops",
        ("--rounds", "10"),
        _needs_llama_server,
    ),
    Benchmark(
        "capacity",
        "Swap cold load and RPC split decode",
        ("--runs", "5", "--tokens", "64"),
        _needs_llama_server,
    ),
    Benchmark(
        "bench_vs_reference",
        "`bench` against a reference client",
        ("--prompts", "4", "--out", "benchmarks/results/vs-reference"),  # gitignored
        _needs_aiperf,
    ),
)
BY_NAME = {b.name: b for b in BENCHMARKS}


class PublishError(FleetError):
    """The README or docs/benchmarks cannot be published as asked."""


# ---------------------------------------------------------------- running


def run_one(bench: Benchmark, results_dir: Path) -> None:
    """Run one benchmark; when it cannot run, or fails, record why instead of figures."""
    path = results_dir / f"{bench.name}.json"
    reason = bench.precondition() if bench.precondition else None
    if reason is None:
        argv = [sys.executable, str(ROOT / "benchmarks" / f"{bench.name}.py"), *bench.args]
        print(f"== {bench.name} {' '.join(bench.args)}", flush=True)
        began = time.time()
        env = os.environ | {"INFERFLEET_BENCH_RESULTS": str(results_dir)}
        done = subprocess.run(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, check=False)
        fresh = path.exists() and path.stat().st_mtime >= began
        if fresh:
            return
        reason = f"the run exited {done.returncode} without recording figures"
    print(f"== {bench.name}: not run: {reason}", flush=True)
    results_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump(skipped(bench.name, reason)))


# ---------------------------------------------------------------- rendering


def _order(name: str) -> tuple[int, str]:
    index = [b.name for b in BENCHMARKS].index(name) if name in BY_NAME else len(BENCHMARKS)
    return index, name


def load_docs(folder: Path) -> dict[str, dict[str, Any]]:
    """Every results document in ``folder`` (validated), by benchmark name, in table order."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name.endswith(".prev.json"):
            continue
        doc = load(path)
        if doc["benchmark"] != path.stem:
            raise ResultsError(
                f"{path}: holds benchmark {doc['benchmark']!r}, not {path.stem!r}",
                where=str(path),
                hint="a results file is named after its benchmark",
            )
        found[path.stem] = doc
    return dict(sorted(found.items(), key=lambda item: _order(item[0])))


def stamp_text(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    load_avg = " ".join(f"{x:.2f}" for x in m["load_average"])
    return (
        f"{m['date_utc']} · {m['cpu_model']}, {fmt(m['cores'])} cores, {m['memory_gib']} GiB · "
        f"{m['os']}, kernel {m['kernel']} · Python {m['python']} · "
        f"inferfleet {m['inferfleet']} ({m['commit']}) · load average {load_avg}"
    )


def _with_unit(value: float, unit: str) -> str:
    return f"{fmt(value)} {unit}".rstrip() if unit != "x" else f"{fmt(value)}x"


def table(doc: dict[str, Any]) -> list[str]:
    figures = doc["figures"]
    lines = [
        "| figure | measured | reference | ratio | target | met? |",
        "|---|---:|---|---:|---|:---:|",
    ]
    for row in rows_of(doc):
        reference = ""
        if row.reference is not None:
            ref_value = _with_unit(figures[row.reference], row.unit)
            reference = f"{row.reference_label}: {ref_value}" if row.reference_label else ref_value
        ratio = row.ratio(figures)
        met = row.met(figures)
        lines.append(
            f"| {row.label} | {_with_unit(row.value(figures), row.unit)} | {reference} | "
            f"{'' if ratio is None else f'{ratio:.2f}x'} | {row.target_text()} | "
            f"{'—' if met is None else ('yes' if met else '**no**')} |"
        )
    return lines


def render_section(docs: dict[str, dict[str, Any]], docs_rel: str = "docs/benchmarks") -> str:
    """The README's benchmark section (markers included) for these documents."""
    out = [
        START,
        "<!-- written by benchmarks/publish.py from docs/benchmarks/*.json; do not edit -->",
    ]
    if not docs:
        out += ["", "No benchmark has been published yet.", ""]
    for name, doc in docs.items():
        title = BY_NAME[name].title if name in BY_NAME else name
        out += ["", f"#### {title} (`{name}`)", "", f"Measured {stamp_text(doc)}.", ""]
        if "skipped" in doc:
            out += [f"Not run: {doc['skipped']}."]
            continue
        out += table(doc)
        plot_link = f"[{name}.png]({docs_rel}/{name}.png)"
        out += ["", f"Plot: {plot_link} · data: [{name}.json]({docs_rel}/{name}.json)"]
    out += ["", END]
    return "\n".join(out)


def replace_section(readme: str, section: str, where: Path) -> str:
    starts, ends = readme.count(START), readme.count(END)
    if starts != 1 or ends != 1 or readme.index(START) > readme.index(END):
        raise PublishError(
            f"{where}: needs exactly one {START} followed by one {END} (found {starts} and {ends})",
            where=str(where),
            hint="put the two marker lines where the benchmark table belongs",
        )
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + section + tail


def current_section(readme: str) -> str:
    """The section as the README holds it now (markers included)."""
    head, rest = readme.split(START, 1)
    return START + rest.split(END, 1)[0] + END


def plot(doc: dict[str, Any]) -> bytes:
    """One PNG: a panel per row, the measured bar next to its reference, the target dashed."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = rows_of(doc)
    figures = doc["figures"]
    with matplotlib.rc_context({"font.size": 9}):
        fig, axes = plt.subplots(len(rows), 1, figsize=(8.0, 0.9 + 1.15 * len(rows)), squeeze=False)
        for ax, row in zip(axes[:, 0], rows, strict=True):
            _panel(ax, row, figures)
        title = BY_NAME[doc["benchmark"]].title if doc["benchmark"] in BY_NAME else doc["benchmark"]
        fig.suptitle(f"{title} ({doc['benchmark']})", fontsize=11, x=0.02, ha="left")
        fig.text(
            0.02, 0.005, _wrap(stamp_text(doc), 120), fontsize=6.5, color="#555555", va="bottom"
        )
        fig.tight_layout(rect=(0, 0.06 + 0.12 / len(rows), 1, 0.97))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
    return buffer.getvalue()


def _wrap(text: str, width: int) -> str:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def _panel(ax: Any, row: Row, figures: dict[str, float]) -> None:
    met = row.met(figures)
    colour = "#4c78a8" if met is None else ("#54a24b" if met else "#e45756")
    labels, values, colours = ["measured"], [row.value(figures)], [colour]
    if row.reference is not None:
        labels.append((row.reference_label or "reference")[:38])
        values.append(figures[row.reference])
        colours.append("#bab0ac")
    ax.barh(range(len(values)), values, color=colours, height=0.6)
    ax.set_yticks(range(len(values)), labels)
    ax.invert_yaxis()
    for i, value in enumerate(values):
        ax.text(value, i, f" {_with_unit(value, row.unit)}", va="center", fontsize=8)
    bound = None
    if row.target is not None:
        ratio_ref = figures[row.reference] if row.reference is not None else None
        bound = row.target * ratio_ref if row.target_on == "ratio" and ratio_ref else row.target
        if row.target_on == "figure" or ratio_ref:
            ax.axvline(bound, color="#333333", linestyle="--", linewidth=1)
    top = max([*values, bound or 0.0, 1e-12])
    ax.set_xlim(min(0.0, *values), top * 1.3)
    verdict = "" if met is None else (" — target met" if met else " — target NOT met")
    target = f" (target {row.target_text()})" if row.target is not None else ""
    ax.set_title(f"{row.label}{target}{verdict}", fontsize=9, loc="left")
    ax.set_xlabel(row.unit if row.unit != "x" else "ratio", fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)


# ---------------------------------------------------------------- publishing


def publish(results_dir: Path, docs_dir: Path, readme: Path, *, use_results: bool) -> list[Path]:
    """Render everything, then write it: docs JSON and PNG per benchmark, the README section."""
    docs = load_docs(docs_dir)
    if use_results:
        docs.update(load_docs(results_dir))
        docs = dict(sorted(docs.items(), key=lambda item: _order(item[0])))
    try:
        readme_text = readme.read_text(encoding="utf-8")
    except OSError as exc:
        raise PublishError(f"{readme}: cannot be read ({exc})", where=str(readme)) from None
    rel = os.path.relpath(docs_dir, readme.parent)
    new_readme = replace_section(readme_text, render_section(docs, rel), readme)
    outputs: dict[Path, str | bytes] = {}
    for name, doc in docs.items():
        outputs[docs_dir / f"{name}.json"] = dump(doc)
        png = docs_dir / f"{name}.png"
        if "skipped" in doc:
            continue
        outputs[png] = plot(doc)
    outputs[readme] = new_readme
    docs_dir.mkdir(parents=True, exist_ok=True)
    for path, data in outputs.items():
        atomic_write(path, data)
    for name in docs:  # a benchmark not run this time has no plot, not an old one
        stale = docs_dir / f"{name}.png"
        if stale not in outputs and stale.exists():
            stale.unlink()
    return list(outputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--from-results",
        action="store_true",
        help="publish benchmarks/results as it is, run nothing",
    )
    parser.add_argument(
        "--only", action="append", choices=sorted(BY_NAME), help="run only this benchmark (repeat)"
    )
    parser.add_argument("--results", type=Path, default=results.RESULTS, help=argparse.SUPPRESS)
    parser.add_argument("--docs", type=Path, default=DOCS, help=argparse.SUPPRESS)
    parser.add_argument("--readme", type=Path, default=README, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if not args.from_results:
            for bench in BENCHMARKS:
                if args.only is None or bench.name in args.only:
                    run_one(bench, args.results)
        written = publish(args.results, args.docs, args.readme, use_results=True)
    except FleetError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
