"""The last benchmark figures of each service, from ``inferfleet bench`` summaries.

``inferfleet bench --out DIR`` writes ``DIR/summary.json`` (schema
``inferfleet.bench/v1``). The status view looks for those under one results
folder (default: the state dir's ``bench/``), newest first, and takes for
each service the newest summary with an arm aimed at it (by service name, or
by the URL the arm measured). Results folders collect files of every age and
origin, so reading is defensive: a summary that is not JSON, has another
schema or misses fields is skipped with a note, never an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inferfleet.bounded import BoundedReadError, load_json
from inferfleet.documents import BenchFiguresInfo, BenchLevelFigures, document_of

SCHEMA_PREFIX = "inferfleet.bench/v1"
MAX_SUMMARIES = 200  # newest first; older result folders are history, not status
MAX_BYTES = 16 * 1024 * 1024
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}


@dataclass(frozen=True)
class BenchLevel:
    concurrency: int
    decode_tps: float | None  # per stream, median (L-53)
    aggregate_tps: float | None  # all streams together, median of runs (L-53)
    ttft_ms: float | None
    # Share of drafted tokens the target accepted, where a drafter ran: judged next to the
    # decode rate, never alone (a lower acceptance can still decode faster, L-48).
    draft_acceptance: float | None = None


@dataclass(frozen=True)
class BenchFigures:
    summary: str  # path of the summary.json
    finished_at: str
    arm: str
    api: str | None
    max_tokens: int | None
    levels: list[BenchLevel] = field(default_factory=list)

    def to_json(self) -> BenchFiguresInfo:
        return document_of(
            BenchFiguresInfo,
            self,
            levels=[document_of(BenchLevelFigures, level) for level in self.levels],
        )


@dataclass(frozen=True)
class Summary:
    path: Path
    finished_at: str
    doc: dict[str, Any]


@dataclass
class BenchIndex:
    summaries: list[Summary]  # newest first
    notes: list[str] = field(default_factory=list)

    def figures(self, service: str, addresses: Iterable[str]) -> BenchFigures | None:
        """The newest figures measured against ``service`` (by name or by one of its addresses)."""
        wanted = {_netloc(a) for a in addresses} - {""}
        for summary in self.summaries:
            for arm in _list(summary.doc.get("arms")):
                if not isinstance(arm, dict) or not isinstance(arm.get("name"), str):
                    continue
                if arm.get("service") == service or _netloc(str(arm.get("url", ""))) in wanted:
                    figures = _figures(summary, arm["name"])
                    if figures is not None:
                        return figures
        return None


class BenchReader:
    """Reads bench summaries, re-parsing only files that changed since the last look.

    The board asks for the status every few seconds; a results folder of a
    hundred runs should cost a directory listing, not a hundred JSON parses.
    """

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple[int, int, int], Summary | None, str]] = {}

    def scan(self, folder: Path) -> BenchIndex:
        """Readable summaries under ``folder`` (``*/summary.json`` and its own), newest first."""
        index = BenchIndex([])
        if not folder.is_dir():
            return index
        candidates = [folder / "summary.json", *folder.glob("*/summary.json")]
        dated: list[tuple[int, Path, tuple[int, int, int]]] = []
        for path in candidates:
            try:
                info = path.stat()
            except OSError:
                continue
            dated.append((info.st_mtime_ns, path, (info.st_mtime_ns, info.st_size, info.st_ino)))
        dated.sort(reverse=True)
        seen: dict[Path, tuple[tuple[int, int, int], Summary | None, str]] = {}
        for _mtime, path, key in dated[:MAX_SUMMARIES]:
            cached = self._seen.get(path)
            if cached is None or cached[0] != key:
                notes: list[str] = []
                summary = _read(path, notes)
                cached = (key, summary, notes[0] if notes else "")
            seen[path] = cached
            if cached[1] is not None:
                index.summaries.append(cached[1])
            elif cached[2]:
                index.notes.append(cached[2])
        self._seen = seen
        # The summary's own finish time orders runs (a copied folder has a new mtime).
        index.summaries.sort(key=lambda s: s.finished_at, reverse=True)
        return index


def scan(folder: Path) -> BenchIndex:
    """Every readable bench summary under ``folder``, newest first (one look, no memory)."""
    return BenchReader().scan(folder)


def _read(path: Path, notes: list[str]) -> Summary | None:
    try:
        # Bounded, regular files only: a FIFO among the results never stalls the board.
        doc = load_json(path, MAX_BYTES, what="bench summary")
    except OSError as exc:  # BoundedReadError (too large, not a file, not JSON), or gone
        why = exc.message if isinstance(exc, BoundedReadError) else type(exc).__name__
        notes.append(f"{path}: not a readable JSON summary ({why}); skipped")
        return None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(SCHEMA_PREFIX):
        schema = doc.get("schema") if isinstance(doc, dict) else None
        notes.append(f"{path}: schema {schema!r} is not {SCHEMA_PREFIX}; skipped")
        return None
    finished = doc.get("finished_at")
    if not isinstance(finished, str):
        notes.append(f"{path}: no finished_at; skipped")
        return None
    return Summary(path, finished, doc)


def _figures(summary: Summary, arm: str) -> BenchFigures | None:
    levels = []
    for level in _list(summary.doc.get("levels")):
        if not isinstance(level, dict) or level.get("arm") != arm:
            continue
        concurrency = level.get("concurrency")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            continue
        levels.append(
            BenchLevel(
                concurrency,
                _median(level.get("decode_tps")),
                _median(level.get("aggregate_tps")),
                _median(level.get("ttft_ms")),
                _acceptance(level.get("draft")),
            )
        )
    if not levels:
        return None
    options = summary.doc.get("options")
    options = options if isinstance(options, dict) else {}
    api = options.get("api")
    max_tokens = options.get("max_tokens")
    return BenchFigures(
        summary=str(summary.path),
        finished_at=summary.finished_at,
        arm=arm,
        api=api if isinstance(api, str) else None,
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        levels=sorted(levels, key=lambda lv: lv.concurrency),
    )


def _acceptance(draft: Any) -> float | None:
    value = draft.get("acceptance") if isinstance(draft, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return None
    return float(value)


def _median(spread: Any) -> float | None:
    if not isinstance(spread, dict):
        return None
    value = spread.get("median")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _netloc(url: str) -> str:
    """``host:port`` of a URL (or of a bare ``host:port``), loopback names made one."""
    text = url if "//" in url else f"//{url}"
    try:
        parts = urlsplit(text)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return ""
    if host in _LOOPBACK:
        host = "127.0.0.1"
    return f"{host}:{port}" if port else host
