"""How long does `inferfleet` take to start?

Each case is a fresh process, timed wall-clock from spawn to exit, in the same
run as two references:

- python:    `python -c pass` (the interpreter alone);
- libraries: `python -c "import pydantic, httpx, typer, rich.console"` (what
             any CLI on this stack pays before its own code);
- inferfleet: `--version`, `--help`, `validate` (of the example fleet) and
             `status --help`.

Runs alternate between the cases so drift hits all alike. Prints medians,
spread and each case's ratio to the libraries reference; records the figures
with results.py. Target: `--version` and `--help` under 0.3 s.

    .venv/bin/python benchmarks/cli_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from results import Row, record

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "local" / "fleet.yaml"
PY = [sys.executable]
LIBS = "import pydantic, httpx, typer, rich"
CLI = [*PY, "-m", "inferfleet"]

CASES: dict[str, list[str]] = {
    "python": [*PY, "-c", "pass"],
    "libraries": [*PY, "-c", "import pydantic, httpx, typer, rich.console"],
    "version": [*CLI, "--version"],
    "help": [*CLI, "--help"],
    "validate": [*CLI, "validate", str(EXAMPLE)],
    "status_help": [*CLI, "status", "--help"],
}


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, cwd=ROOT, env=os.environ | {"COLUMNS": "120"})
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for argv in CASES.values():
        timed(argv)  # warm the page cache and .pyc files
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.runs):
        for name, argv in CASES.items():
            samples[name].append(timed(argv))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    reference = medians["libraries"]
    print(f"{'case':<12} {'median':>9} {'min':>9} {'max':>9} {'x libraries':>12}")
    for name, values in samples.items():
        print(
            f"{name:<12} {medians[name]:9.3f} {min(values):9.3f} {max(values):9.3f}"
            f" {medians[name] / reference:12.2f}"
        )
    figures: dict[str, float] = {f"{name}_s": value for name, value in medians.items()}
    for name in ("version", "help", "validate", "status_help"):
        figures[f"{name}_vs_libraries"] = medians[name] / reference
    record(
        "cli_startup",
        figures,
        rows=[
            Row("version_s", "inferfleet --version", "s", True, "libraries_s", LIBS, 0.3),
            Row("help_s", "inferfleet --help", "s", True, "libraries_s", LIBS, 0.3),
            Row("validate_s", "inferfleet validate (example)", "s", True, "libraries_s", LIBS),
            Row("status_help_s", "inferfleet status --help", "s", True, "libraries_s", LIBS),
            Row("python_s", "python -c pass", "s", True, "libraries_s", LIBS),
        ],
        notes={"runs": args.runs, "target": "--version and --help < 0.3 s"},
    )


if __name__ == "__main__":
    main()
