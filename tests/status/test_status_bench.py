"""Last bench figures: the newest summary aimed at a service, read defensively."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from helpers.bench_summaries import summary, write

from inferfleet.status.bench import BenchReader, scan
from inferfleet.status.view import bench_text

ADDRESSES = ["http://127.0.0.1:8080", "127.0.0.1:8080"]


def test_the_newest_summary_of_the_service_wins(tmp_path: Path) -> None:
    write(tmp_path, "old", summary("2026-01-01T10:00:00Z", levels={1: (10.0, 10.0, 300.0)}))
    write(tmp_path, "new", summary("2026-03-01T10:00:00Z", levels={1: (40.0, 40.0, 100.0)}))
    # Another service's newer run does not count for gemma.
    write(tmp_path, "other", summary("2026-04-01T10:00:00Z", service="coder", url="http://x:9"))
    figures = scan(tmp_path).figures("gemma", ADDRESSES)
    assert figures is not None
    assert figures.finished_at == "2026-03-01T10:00:00Z"
    assert [(lv.concurrency, lv.decode_tps) for lv in figures.levels] == [(1, 40.0)]
    assert figures.summary == str(tmp_path / "new" / "summary.json")


def test_order_is_the_summary_finish_time_not_the_file_time(tmp_path: Path) -> None:
    newer = write(tmp_path, "a", summary("2026-05-01T00:00:00Z", levels={1: (5.0, 5.0, 1.0)}))
    older = write(tmp_path, "b", summary("2026-02-01T00:00:00Z", levels={1: (9.0, 9.0, 1.0)}))
    os.utime(newer, (1_000_000, 1_000_000))  # copied long ago; its run is still the newest
    os.utime(older, None)
    figures = scan(tmp_path).figures("gemma", ADDRESSES)
    assert figures is not None and figures.levels[0].decode_tps == 5.0


def test_an_arm_aimed_at_the_url_counts_loopback_names_as_one(tmp_path: Path) -> None:
    write(
        tmp_path, "url", summary("2026-01-01T00:00:00Z", service=None, url="http://localhost:8080")
    )
    figures = scan(tmp_path).figures("gemma", ADDRESSES)
    assert figures is not None and figures.arm == "http://localhost:8080"
    assert scan(tmp_path).figures("gemma", ["http://127.0.0.1:9999"]) is None


def test_levels_are_sorted_and_aggregate_is_kept_apart(tmp_path: Path) -> None:
    # L-53: two streams can sum below one; per-stream and aggregate stay separate numbers.
    levels = {4: (9.0, 30.0, 400.0), 1: (38.0, 38.0, 100.0), 2: (20.0, 35.0, 200.0)}
    write(tmp_path, "run", summary("2026-01-01T00:00:00Z", levels=levels))
    figures = scan(tmp_path).figures("gemma", ADDRESSES)
    assert figures is not None
    assert [lv.concurrency for lv in figures.levels] == [1, 2, 4]
    assert [(lv.decode_tps, lv.aggregate_tps) for lv in figures.levels][2] == (9.0, 30.0)
    assert figures.to_json()["levels"][0] == {
        "concurrency": 1,
        "decode_tps": 38.0,
        "aggregate_tps": 38.0,
        "ttft_ms": 100.0,
        "draft_acceptance": None,
    }


def test_a_drafters_acceptance_is_shown_beside_its_rate(tmp_path: Path) -> None:
    doc = summary("2026-01-01T00:00:00Z", levels={1: (52.0, 52.0, 90.0)})
    doc["levels"][0]["draft"] = {"requests": 4, "proposed": 400, "accepted": 288,
                                 "acceptance": 0.72}  # fmt: skip
    write(tmp_path, "run", doc)
    figures = scan(tmp_path).figures("gemma", ADDRESSES)
    assert figures is not None and figures.levels[0].draft_acceptance == 0.72
    assert bench_text(figures) == "52 tok/s @1, 72% of drafts accepted (2026-01-01)"
    # What a hand-edited summary claims beyond a share is not shown.
    doc["levels"][0]["draft"]["acceptance"] = 7.2
    write(tmp_path, "run", doc)
    figures = scan(tmp_path).figures("gemma", ADDRESSES)
    assert figures is not None and figures.levels[0].draft_acceptance is None


def test_unreadable_and_foreign_summaries_are_skipped_with_a_note(tmp_path: Path) -> None:
    good = write(tmp_path, "good", summary("2026-01-01T00:00:00Z"))
    write(tmp_path, "broken", "{not json")
    write(tmp_path, "foreign", json.dumps({"schema": "someone.else/v9", "levels": []}))
    write(tmp_path, "listy", json.dumps([1, 2]))
    write(tmp_path, "undated", json.dumps({"schema": "inferfleet.bench/v1"}))
    no_levels = summary("2026-09-01T00:00:00Z")
    no_levels["levels"] = [{"arm": "gemma", "concurrency": "one"}, "junk", None]
    write(tmp_path, "nolevels", no_levels)
    index = scan(tmp_path)
    figures = index.figures("gemma", ADDRESSES)
    assert figures is not None and figures.summary == str(good)  # the newer one has no levels
    notes = "\n".join(index.notes)
    assert "broken/summary.json: not a readable JSON summary" in notes
    assert "'someone.else/v9' is not inferfleet.bench/v1" in notes
    assert "listy/summary.json: schema None" in notes
    assert "undated/summary.json: no finished_at" in notes


def test_a_fifo_or_a_deep_document_among_the_results_is_skipped_at_once(tmp_path: Path) -> None:
    """The board scans the results on every poll: a FIFO there is refused without a read
    (it would wait for a writer forever) and nesting is bounded (no RecursionError)."""
    good = write(tmp_path, "good", summary("2026-01-01T00:00:00Z"))
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "summary.json")
    write(tmp_path, "deep", "[" * 100_000 + "]" * 100_000)
    started = time.monotonic()
    index = scan(tmp_path)
    assert time.monotonic() - started < 5
    figures = index.figures("gemma", ADDRESSES)
    assert figures is not None and figures.summary == str(good)
    notes = "\n".join(index.notes)
    assert "fifo/summary.json: not a readable JSON summary" in notes and "a FIFO" in notes
    assert "deep/summary.json: not a readable JSON summary" in notes and "levels deep" in notes


def test_a_missing_folder_is_no_figures(tmp_path: Path) -> None:
    index = scan(tmp_path / "nothing-here")
    assert index.summaries == [] and index.notes == []


def test_the_reader_reparses_only_changed_files(tmp_path: Path) -> None:
    reader = BenchReader()
    path = write(tmp_path, "run", summary("2026-01-01T00:00:00Z", levels={1: (1.0, 1.0, 1.0)}))
    first = reader.scan(tmp_path).figures("gemma", ADDRESSES)
    assert first is not None and first.levels[0].decode_tps == 1.0
    again = reader.scan(tmp_path).summaries[0]
    assert again is reader.scan(tmp_path).summaries[0]  # same object: not read again
    path.write_text(json.dumps(summary("2026-01-02T00:00:00Z", levels={1: (2.0, 2.0, 1.0)})))
    # File times are coarse (a jiffy): make the rewrite visibly newer, as a later run is.
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9, path.stat().st_mtime_ns + 10**9))
    changed = reader.scan(tmp_path).figures("gemma", ADDRESSES)
    assert changed is not None and changed.levels[0].decode_tps == 2.0
