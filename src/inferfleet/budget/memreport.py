"""Parse llama-server's own memory report out of its log.

llama-server (b11434) reports memory in two forms, both parsed here:

- ``--log-jsonl``: ``{"type": "fit_memory_breakdown", "data": {"unit": "MiB",
  "rows": [{"kind": "device"|"host"|"buffer_type", "name": ..., "self": ...,
  "model": ..., "context": ..., "compute": ...}]}}``, once when ``--fit``
  projects the load (a dry run, before the weights are read) and once when the
  server shuts down cleanly (what was really allocated). Without
  ``--log-jsonl`` the same table is printed as text
  (``common_memory_breakdown_print: |   - Host | 312 = 235 + 54 + 23 |``).
- the buffer lines (``-lv 4``; in JSONL they are the ``msg`` of ``log``
  events): ``CPU_Mapped model buffer size = 235.16 MiB``, ``CPU KV buffer
  size = 24.00 MiB``, ``llama_kv_cache: size = 24.00 MiB (4096 cells, 3
  layers, 2/2 seqs), K (f16): 12.00 MiB, V (f16): 12.00 MiB``, ``CPU compute
  buffer size = 23.28 MiB``, and ``llama_context: n_ctx = 8192``.

A log may hold several boots (a restarted server appending to one file): the
last boot wins. Anything else, including malformed JSON, is skipped; a log
with no memory report at all is a :class:`BudgetError` that says which flags
produce one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from inferfleet.budget.errors import BudgetError
from inferfleet.gguf.model import Keyed

MAX_LINE = 1 << 16  # longer lines are cut: the report's lines are short
Phase = Literal["projected", "loaded"]
RowKind = Literal["device", "host", "buffer_type"]

_BUFFER = re.compile(
    # an RPC device's buffer is named after its endpoint: RPC0[10.0.0.2:50052]
    r"(?P<buffer>[A-Za-z][\w.-]*(?:\[[^\]\s]+\])?)\s+(?P<what>model|KV|RS|compute|output) "
    r"buffer size\s*=\s*"
    r"(?P<mib>\d+(?:\.\d+)?) MiB"
)
_CACHE = re.compile(
    r"(?P<owner>\w+): size =\s*(?P<mib>\d+(?:\.\d+)?) MiB \(\s*(?P<cells>\d+) cells,\s*"
    r"(?P<layers>\d+) layers,\s*(?P<seqs>\d+)/(?P<seqs_max>\d+) seqs\)"
    r"(?:, (?P<a>[KR]) \((?P<a_type>\w+)\):\s*(?P<a_mib>\d+(?:\.\d+)?) MiB, "
    r"(?P<b>[VS]) \((?P<b_type>\w+)\):\s*(?P<b_mib>\d+(?:\.\d+)?) MiB)?"
)
_PARAM = re.compile(
    r"llama_context:\s+(?P<key>n_ctx|n_ctx_seq|n_seq_max|n_batch|n_ubatch|flash_attn|"
    r"kv_unified)\s*=\s*(?P<value>\S+)"
)
# The text tables (common/fit.cpp): a device row is "total = free + (self = model +
# context + compute) + unaccounted", the Host and buffer-type rows "self = model +
# context + compute".
_TABLE_DEVICE = re.compile(
    r"\|\s+-\s+(?P<name>.+?)\s+\|\s*(?P<total>\d+)\s+=\s+(?P<free>\d+)\s+\+\s+\(\s*"
    r"(?P<self>\d+)\s+=\s+(?P<model>\d+)\s+\+\s+(?P<context>\d+)\s+\+\s+(?P<compute>\d+)\s*\)"
)
_TABLE_OTHER = re.compile(
    r"\|\s+-\s+(?P<name>.+?)\s+\|\s*(?P<self>\d+)\s+=\s+(?P<model>\d+)\s+\+\s+"
    r"(?P<context>\d+)\s+\+\s+(?P<compute>\d+)\s*\|"
)
_FA_RESOLVED = re.compile(r"Flash Attention (enabled|disabled)")
_BOOT_START = "load_model: loading model"
_LOAD_STARTED = "load_tensors:"


@dataclass(frozen=True)
class BreakdownRow:
    kind: RowKind
    name: str
    self_mib: int
    model_mib: int
    context_mib: int
    compute_mib: int
    total_mib: int | None = None
    free_mib: int | None = None


@dataclass(frozen=True)
class Breakdown:
    phase: Phase  # "projected": --fit's dry run; "loaded": after the real load
    rows: tuple[BreakdownRow, ...]

    def row(self, name: str) -> BreakdownRow | None:
        return next((r for r in self.rows if r.name == name), None)


@dataclass(frozen=True)
class CacheLine:
    """One ``size = ... (N cells, L layers, S/S seqs)`` line of a KV or recurrent cache."""

    owner: str  # llama_kv_cache, llama_memory_recurrent, ...
    mib: float
    cells: int
    layers: int
    seqs: int
    k_type: str | None = None  # K (or R) type
    v_type: str | None = None  # V (or S) type


@dataclass(frozen=True)
class BufferLine:
    buffer: str  # CPU, CPU_Mapped, CUDA0, CUDA_Host, ...
    what: str  # model, KV, RS, compute, output
    mib: float


@dataclass(frozen=True)
class BootReport:
    """What one llama-server boot said about its memory."""

    source: str
    params: dict[str, str] = field(default_factory=dict)
    breakdowns: tuple[Breakdown, ...] = ()
    caches: tuple[CacheLine, ...] = ()
    buffers: tuple[BufferLine, ...] = ()
    flash_attn: bool | None = None  # as resolved by the server, when it said
    skipped_lines: int = 0  # malformed JSON lines

    def _param(self, key: str) -> int | None:
        value = self.params.get(key)
        return int(value) if value is not None and value.isdigit() else None

    n_ctx = Keyed("n_ctx", _param)
    n_seq_max = Keyed("n_seq_max", _param)
    n_ubatch = Keyed("n_ubatch", _param)

    @property
    def breakdown(self) -> Breakdown | None:
        """The most telling breakdown: what was allocated, else the projection."""
        loaded = [b for b in self.breakdowns if b.phase == "loaded"]
        chosen = loaded or list(self.breakdowns)
        return chosen[-1] if chosen else None

    def buffer_mib(self, what: str, buffer: str | None = None) -> float:
        return sum(
            b.mib for b in self.buffers if b.what == what and (buffer is None or b.buffer == buffer)
        )

    @property
    def kv_mib(self) -> float:
        """The KV caches' sizes as the server printed them (``llama_kv_cache: size = ...``)."""
        return sum(c.mib for c in self.caches if c.owner.startswith("llama_kv_cache"))


@dataclass
class _State:
    params: dict[str, str] = field(default_factory=dict)
    breakdowns: list[Breakdown] = field(default_factory=list)
    caches: list[CacheLine] = field(default_factory=list)
    buffers: list[BufferLine] = field(default_factory=list)
    flash_attn: bool | None = None
    loading: bool = False
    json_breakdowns: bool = False
    skipped: int = 0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_PARTS = ("self", "model", "context", "compute")  # every row has them
_NUMBERS = (*_PARTS, "total", "free")  # a device row adds these


def _row(kind: RowKind, name: str, numbers: Mapping[str, int | None]) -> BreakdownRow | None:
    """A breakdown row from its numbers by key (JSON keys and table groups agree); None
    when one of the parts every row has is missing."""
    self_mib, model, context, compute = (numbers.get(k) for k in _PARTS)
    if self_mib is None or model is None or context is None or compute is None:
        return None
    return BreakdownRow(
        kind,
        name,
        self_mib,
        model,
        context,
        compute,
        total_mib=numbers.get("total"),
        free_mib=numbers.get("free"),
    )


def _json_rows(data: Any) -> list[BreakdownRow] | None:
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        return None
    rows = []
    for raw in data["rows"]:
        if not isinstance(raw, dict):
            return None
        kind, name = raw.get("kind"), raw.get("name")
        if kind not in ("device", "host", "buffer_type") or not isinstance(name, str):
            return None
        row = _row(kind, name, {k: _int(raw.get(k)) for k in _NUMBERS})
        if row is None:
            return None
        rows.append(row)
    return rows


def _table_row(text: str) -> BreakdownRow | None:
    device = _TABLE_DEVICE.search(text)
    match = device or _TABLE_OTHER.search(text)
    if match is None:
        return None
    name = match.group("name").strip()
    numbers = {k: int(v) for k, v in match.groupdict().items() if k != "name"}
    if device is not None:
        # "CUDA0 (RTX 3090)": the JSON rows carry the name alone.
        return _row("device", name.split(" (", 1)[0], numbers)
    return _row("host" if name == "Host" else "buffer_type", name, numbers)


def _message(state: _State, text: str) -> None:
    if _BOOT_START in text:
        fresh = _State(skipped=state.skipped)
        state.__dict__.update(fresh.__dict__)
        return
    if _LOAD_STARTED in text:
        state.loading = True
    if "buffer size" in text:
        for found in _BUFFER.finditer(text):
            state.buffers.append(
                BufferLine(found.group("buffer"), found.group("what"), float(found.group("mib")))
            )
    cache = _CACHE.search(text) if " cells," in text else None
    if cache is not None:
        state.caches.append(
            CacheLine(
                cache.group("owner"),
                float(cache.group("mib")),
                int(cache.group("cells")),
                int(cache.group("layers")),
                int(cache.group("seqs")),
                cache.group("a_type"),
                cache.group("b_type"),
            )
        )
    param = _PARAM.search(text) if "llama_context:" in text else None
    if param is not None:
        state.params[param.group("key")] = param.group("value")
    resolved = _FA_RESOLVED.search(text) if "Flash Attention" in text else None
    if resolved is not None:
        state.flash_attn = resolved.group(1) == "enabled"
    if "common_memory_breakdown_print" in text and not state.json_breakdowns:
        row = _table_row(text)
        if row is not None:
            phase: Phase = "loaded" if state.loading else "projected"
            # Rows of one table arrive one line at a time; a Host row after a
            # device row of the same table continues it.
            last = state.breakdowns[-1] if state.breakdowns else None
            if (
                last is not None
                and last.phase == phase
                and row.name not in {r.name for r in last.rows}
            ):
                state.breakdowns[-1] = Breakdown(phase, (*last.rows, row))
            else:
                state.breakdowns.append(Breakdown(phase, (row,)))


def _line(state: _State, line: str) -> None:
    text = line[:MAX_LINE].strip()
    if not text:
        return
    if text.startswith("{"):
        try:
            event = json.loads(text)
        except ValueError:
            state.skipped += 1
            return
        if not isinstance(event, dict):
            state.skipped += 1
            return
        if event.get("type") == "fit_memory_breakdown":
            rows = _json_rows(event.get("data"))
            if rows is None:
                state.skipped += 1
                return
            if not state.json_breakdowns:
                state.breakdowns = []  # the JSON events replace the text tables
                state.json_breakdowns = True
            state.breakdowns.append(
                Breakdown("loaded" if state.loading else "projected", tuple(rows))
            )
            return
        message = event.get("msg")
        if isinstance(message, str):
            _message(state, message)
        return
    _message(state, text)


def parse_lines(lines: Iterable[str], source: str = "<log>") -> BootReport:
    """The memory report of the last boot in ``lines`` (JSONL or text)."""
    state = _State()
    for line in lines:
        _line(state, line)
    if not state.breakdowns and not state.buffers and not state.caches:
        raise BudgetError(
            "no llama-server memory report in this log",
            where=source,
            hint="start llama-server with --log-jsonl (memory breakdown events) or -lv 4 "
            "(buffer sizes) and keep its whole output, from the start to a clean shutdown",
        )
    return BootReport(
        source=source,
        params=dict(state.params),
        breakdowns=tuple(state.breakdowns),
        caches=tuple(state.caches),
        buffers=tuple(state.buffers),
        flash_attn=state.flash_attn,
        skipped_lines=state.skipped,
    )


def parse_log(path: Path) -> BootReport:
    """Read a llama-server log file (streamed: server logs grow large)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return parse_lines(handle, str(path))
    except OSError as exc:
        raise BudgetError(
            f"cannot read the log: {exc.strerror}", where=str(path), hint="check the path"
        ) from None
