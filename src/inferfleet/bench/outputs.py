"""Writing a benchmark's results: all files or none.

Everything is written into a staging folder beside the target and renamed
into place at the end (:func:`~inferfleet.io.files.staged_directory`), so an
interrupted run never leaves a half-written report that looks complete.
"""

from __future__ import annotations

import json
from pathlib import Path

from inferfleet.bench import plots, report
from inferfleet.bench.measure import RequestRecord
from inferfleet.documents import BenchDocument
from inferfleet.errors import UsageError
from inferfleet.io.files import staged_directory

FILES = ("requests.jsonl", "summary.json", "levels.csv", "report.md")


def check_out_dir(out: Path) -> None:
    """Refuse before measuring anything: results must not mix with an older run's."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(
            f"{out} already exists and is not an empty folder",
            hint="choose a new --out folder; results of different runs are never mixed",
        )


def write(out: Path, summary: BenchDocument, records: list[RequestRecord]) -> list[Path]:
    check_out_dir(out)
    with staged_directory(out) as staging:
        with (staging / "requests.jsonl").open("w", encoding="utf-8") as handle:
            for rec in records:
                handle.write(json.dumps(rec.to_json(), sort_keys=True) + "\n")
        (staging / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
        (staging / "levels.csv").write_text(report.csv_text(summary), "utf-8")
        drawn = plots.draw_all(records, summary, staging / "plots") if records else []
        note = plots.SKIPPED if records and not drawn else None
        (staging / "report.md").write_text(
            report.markdown(summary, plots=drawn, plots_note=note), "utf-8"
        )
    return [out / name for name in FILES] + [out / "plots" / name for name in drawn]
