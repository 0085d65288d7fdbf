"""Benchmark results as JSON, the machine they came from, and the comparison with the last run.

Every benchmark calls :func:`record` with its figures and the :class:`Row`\\ s
that say how to read them (the reference measured in the same run, the
target, which direction is better): they are written to
``benchmarks/results/<name>.json`` (the previous file kept as
``.prev.json``) with a stamp of the machine (CPU model, cores, memory,
OS/kernel, Python, inferfleet version and commit, UTC date, load average),
and each figure is printed next to the last run's value with the change, so
a slower build is seen in the same terminal. Timed *tests* stay out of the
suite: speed is judged here, against a reference measured in the same run.

``benchmarks/publish.py`` turns these files into ``docs/benchmarks/<name>.json``
and ``.png`` and the README's table; :func:`load` is the one reader and
validator of the format, for both.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inferfleet.errors import FleetError  # noqa: E402
from inferfleet.io.files import atomic_write  # noqa: E402

RESULTS = Path(os.environ.get("INFERFLEET_BENCH_RESULTS", Path(__file__).parent / "results"))
FORMAT = 1
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MACHINE_KEYS = (
    "cpu_model",
    "cores",
    "memory_gib",
    "os",
    "kernel",
    "python",
    "inferfleet",
    "commit",
    "date_utc",
    "load_average",
)


class ResultsError(FleetError):
    """A benchmark results file is missing, unreadable or not in the expected shape."""


@dataclass(frozen=True)
class Row:
    """One line of the published table: a figure, how to judge it, against what.

    ``figure`` and ``reference`` are keys of the same run's figures; the ratio
    is figure / reference. ``target`` bounds the figure (``target_on="figure"``)
    or the ratio (``"ratio"``): at most the bound when ``lower_is_better``,
    at least it otherwise.
    """

    figure: str
    label: str
    unit: str
    lower_is_better: bool
    reference: str | None = None
    reference_label: str = ""
    target: float | None = None
    target_on: Literal["figure", "ratio"] = "figure"

    def value(self, figures: dict[str, float]) -> float:
        return figures[self.figure]

    def ratio(self, figures: dict[str, float]) -> float | None:
        if self.reference is None:
            return None
        ref = figures[self.reference]
        return figures[self.figure] / ref if ref else None

    def met(self, figures: dict[str, float]) -> bool | None:
        if self.target is None:
            return None
        judged = self.ratio(figures) if self.target_on == "ratio" else self.value(figures)
        if judged is None:
            return None
        return judged <= self.target if self.lower_is_better else judged >= self.target

    def target_text(self) -> str:
        if self.target is None:
            return ""
        sign = "≤" if self.lower_is_better else "≥"
        if self.target_on == "ratio":
            return f"{sign} {fmt(self.target)}x ref."
        if self.unit == "x":
            return f"{sign} {fmt(self.target)}x"
        return f"{sign} {fmt(self.target)} {self.unit}".rstrip()


def fmt(value: float) -> str:
    """A figure in 4 significant digits, integers without a point."""
    if float(value).is_integer() and abs(value) < 1e9:
        return str(int(value))
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.4g}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read(Path("/proc/cpuinfo")).splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "cpu model"):
            return value.strip()
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    for line in _read(Path("/proc/meminfo")).splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) * 1024 / 2**30, 1)
    return 0.0


def _os_name() -> str:
    for line in _read(Path("/etc/os-release")).splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.system()


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def machine() -> dict[str, Any]:
    """The stamp every result carries: what ran it, where and when (UTC)."""
    from inferfleet import __version__

    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "memory_gib": _memory_gib(),
        "os": _os_name(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "inferfleet": __version__,
        "commit": _commit(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def record(
    name: str,
    figures: dict[str, float],
    *,
    rows: list[Row],
    notes: dict[str, Any] | None = None,
) -> Path:
    """Write ``figures`` for benchmark ``name`` with the rows that read them; print each
    against the last run's value (a change of more than 10% the wrong way is flagged)."""
    figures = {k: float(v) for k, v in figures.items()}
    doc = {
        "format": FORMAT,
        "benchmark": name,
        "machine": machine(),
        "figures": figures,
        "rows": [asdict(row) for row in rows],
        "notes": notes or {},
    }
    path = RESULTS / f"{name}.json"
    validate(doc, path)  # a benchmark that declares a row for a figure it lacks fails here
    RESULTS.mkdir(parents=True, exist_ok=True)
    previous: dict[str, Any] = {}
    if path.exists():
        try:
            previous = json.loads(path.read_text())
        except ValueError:
            previous = {}
        path.replace(RESULTS / f"{name}.prev.json")
    atomic_write(path, dump(doc))
    before = previous.get("figures", {}) if isinstance(previous, dict) else {}
    lower = {row.figure for row in rows if row.lower_is_better}
    for key, value in sorted(figures.items()):
        old = before.get(key) if isinstance(before, dict) else None
        if not isinstance(old, int | float) or old == 0:
            print(f"  {key}: {value:.4g} (no previous run)")
            continue
        change = (value - old) / abs(old)
        worse = change > 0.10 if key in lower else change < -0.10
        flag = "  <- regression?" if worse else ""
        print(f"  {key}: {value:.4g} (last run {old:.4g}, {change:+.0%}){flag}")
    print(f"results: {path}")
    return path


def skipped(name: str, reason: str) -> dict[str, Any]:
    """The document of a benchmark that could not run here, with why."""
    return {
        "format": FORMAT,
        "benchmark": name,
        "machine": machine(),
        "skipped": reason,
        "figures": {},
        "rows": [],
        "notes": {},
    }


def dump(doc: dict[str, Any]) -> str:
    """The one serialisation of a results document (sorted, stable)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _fail(path: Path, problem: str) -> ResultsError:
    return ResultsError(
        f"{path}: {problem}",
        where=str(path),
        hint="rerun the benchmark (or benchmarks/publish.py without --from-results) "
        "to write it again",
    )


def _text(value: object, path: Path, what: str) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise _fail(path, f"{what} must be a string of at most 200 characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or "|" in value:
        raise _fail(path, f"{what} holds a control character or '|': {value!r}")
    return value


def _number(value: object, path: Path, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(path, f"{what} must be a finite number, not {value!r}")
    return float(value)


def validate(doc: object, path: Path) -> dict[str, Any]:
    """Check a results document's shape; raise :class:`ResultsError` naming ``path``."""
    if not isinstance(doc, dict):
        raise _fail(path, "the document is not a JSON object")
    if doc.get("format") != FORMAT:
        raise _fail(path, f"format must be {FORMAT}, found {doc.get('format')!r}")
    name = doc.get("benchmark")
    if not isinstance(name, str) or not NAME.match(name):
        raise _fail(path, f"benchmark name {name!r} is not a short lowercase identifier")
    stamp = doc.get("machine")
    if not isinstance(stamp, dict) or set(stamp) != set(MACHINE_KEYS):
        raise _fail(path, f"machine must hold exactly {', '.join(MACHINE_KEYS)}")
    for key in ("cpu_model", "os", "kernel", "python", "inferfleet", "commit", "date_utc"):
        _text(stamp[key], path, f"machine.{key}")
    _number(stamp["cores"], path, "machine.cores")
    _number(stamp["memory_gib"], path, "machine.memory_gib")
    load = stamp["load_average"]
    if not isinstance(load, list) or len(load) != 3:
        raise _fail(path, "machine.load_average must be three numbers")
    for x in load:
        _number(x, path, "machine.load_average")
    figures = doc.get("figures")
    if not isinstance(figures, dict):
        raise _fail(path, "figures must be an object of name: number")
    for key, value in figures.items():
        _text(key, path, "a figure's name")
        _number(value, path, f"figure {key}")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise _fail(path, "rows must be a list")
    if not isinstance(doc.get("notes"), dict):
        raise _fail(path, "notes must be an object")
    if "skipped" in doc:
        _text(doc["skipped"], path, "skipped")
        return doc
    if not rows:
        raise _fail(path, "no rows: the benchmark declares none of its figures")
    fields = set(Row.__dataclass_fields__)
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict) or set(raw) != fields:
            raise _fail(path, f"rows[{i}] must hold exactly {', '.join(sorted(fields))}")
        try:
            row = Row(**raw)
        except TypeError as exc:
            raise _fail(path, f"rows[{i}]: {exc}") from None
        for key in (row.figure, row.reference):
            if key is not None and key not in figures:
                raise _fail(path, f"rows[{i}] names figure {key!r}, which the run did not record")
        _text(row.label, path, f"rows[{i}].label")
        _text(row.unit, path, f"rows[{i}].unit")
        _text(row.reference_label, path, f"rows[{i}].reference_label")
        if not isinstance(row.lower_is_better, bool):
            raise _fail(path, f"rows[{i}].lower_is_better must be true or false")
        if row.target is not None:
            _number(row.target, path, f"rows[{i}].target")
        if row.target_on not in ("figure", "ratio") or (
            row.target_on == "ratio" and row.reference is None
        ):
            raise _fail(path, f"rows[{i}].target_on must be 'figure', or 'ratio' with a reference")
    return doc


def load(path: Path) -> dict[str, Any]:
    """Read and validate one results document."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot be read ({exc})") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _fail(path, f"is not valid JSON ({exc})") from None
    return validate(doc, path)


def rows_of(doc: dict[str, Any]) -> list[Row]:
    return [Row(**raw) for raw in doc["rows"]]
