"""The status as terminal tables: one row per service, one per host, then the notes.

Everything that came from a file or a server is escaped before rich sees it.
"""

from __future__ import annotations

from inferfleet.fleetfile.quantities import format_duration
from inferfleet.output import Col, Column, Output, esc
from inferfleet.status.bench import BenchFigures
from inferfleet.status.frontdoor import FrontRow
from inferfleet.status.model import FleetStatus, Revision, ServiceRow

STATE_STYLE = {
    "healthy": "green",
    "contract-failing": "red",
    "loading": "yellow",
    "unhealthy": "red",
    "down": "red",
    "foreign": "red",
    "stale": "red",
    "crash-looping": "red",
    "unreachable": "red",
    "unknown": "red",
    "stopped": "yellow",  # declared but not running: a problem (exit 1)
    "held": "dim",  # held down on purpose: not a problem
}
REVISION_STYLE = {
    "current": "green",
    "unchanged": "green",
    "outdated": "yellow",
    "new": "yellow",
    "unknown": "red",
    "untracked": "dim",
}
REACH_STYLE = {
    "local": "green",
    "ssh": "green",
    "http": "yellow",
    "unreachable": "red",
    "unknown": "red",
}
# At 80 columns the least needed give way first (highest drop); --wide shows all.
SERVICE_COLUMNS: list[Column] = [
    Col("service", ident=True),
    Col("host", ident=True),
    "health",
    Col("pid", drop=1),
    Col("uptime", drop=5),
    Col("runtime", drop=7),
    Col("model", drop=3),
    "ctx",
    Col("busy", drop=6),
    Col("deferred", drop=8),
    "revision",
    Col("last bench", drop=9),
    Col("url", drop=4),
]
HOST_COLUMNS: list[Column] = [
    Col("host", ident=True),
    Col("address", drop=2),
    "reached",
    "healthy",
    Col("memory used", drop=3),
    Col("checkout", drop=1),
    "detail",
]


def memory_cell(memory: dict[str, int]) -> str:
    """``nvidia:0 20.1 GiB, ram 6.2 GiB``: bytes in use per device, where the host told."""
    if not memory:
        return "-"
    return ", ".join(f"{name} {used / (1 << 30):.1f} GiB" for name, used in memory.items())


def _styled(text: str, style: str | None) -> str:
    return f"[{style}]{esc(text)}[/{style}]" if style else esc(text)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def revision_text(revision: Revision) -> str:
    sha = (revision.deployed or "")[:10]
    head = (revision.head or "")[:10]
    if revision.state in {"current", "unchanged"}:
        return f"{revision.state} {sha}"
    if revision.state == "outdated":
        return f"outdated {sha} (HEAD {head})"
    return revision.state


def bench_text(figures: BenchFigures | None) -> str:
    """Per-stream decode at concurrency 1 (with the drafter's acceptance beside it, where one
    ran) and the aggregate at the highest level (L-53)."""
    if figures is None or not figures.levels:
        return "-"
    first, last = figures.levels[0], figures.levels[-1]
    text = f"{_number(first.decode_tps)} tok/s @{first.concurrency}"
    if first.draft_acceptance is not None:
        text += f", {first.draft_acceptance:.0%} of drafts accepted"
    if last is not first:
        text += f", {_number(last.aggregate_tps)} agg @{last.concurrency}"
    return f"{text} ({figures.finished_at[:10]})"


def service_cells(row: ServiceRow) -> list[str]:
    slots = "-" if row.slots is None else str(row.slots)
    busy = "-" if row.busy_slots is None else f"{row.busy_slots}/{slots}"
    return [
        esc(row.service),
        esc(row.host),
        _styled(row.state, STATE_STYLE.get(row.state)),
        "-" if row.pid is None else str(row.pid),
        "-" if row.uptime_s is None else format_duration(row.uptime_s),
        esc(row.runtime_version or "-"),
        esc(row.model or "-"),
        f"{row.ctx_per_slot or '-'}x{slots}" if row.kind == "llm" else "-",
        busy,
        _number(row.requests_deferred),
        _styled(revision_text(row.revision), REVISION_STYLE.get(row.revision.state)),
        esc(bench_text(row.bench)),
        esc(row.url),
    ]


GATEWAY_STYLE = {"healthy": "green", "degraded": "red", "down": "red", "unhealthy": "red"}


# What a front-door part reaches behind it, as its column is named.
BEHIND = {"gateway": "backends", "proxy": "upstreams"}


def front_table(out: Output, row: FrontRow) -> None:
    """One front-door part (the gateway or the auth proxy): its state, and what it reaches
    behind it (the gateway's backends as LiteLLM reaches them, the proxy's upstreams as
    reached through it), by state."""
    reach = ", ".join(
        _styled(name, "green" if state == "ok" else "red") for name, state in row.reached.items()
    )
    cells = [
        row.name,
        esc(row.host),
        _styled(row.state, GATEWAY_STYLE.get(row.state, "red")),
        "-" if row.pid is None else str(row.pid),
        esc(row.engine or "-"),
        reach or "-",
        esc(row.url),
    ]
    out.table(None, [row.name, "host", "health", "pid", "engine", BEHIND[row.name], "url"], [cells])
    if row.detail:
        out.line(f"  {row.name}: {esc(row.detail)}")


def show(out: Output, status: FleetStatus) -> None:
    """Print the status in human form (nothing in --json or quiet mode)."""
    out.table(None, SERVICE_COLUMNS, [service_cells(r) for r in status.services])
    for row in status.services:
        if row.detail and row.state != "stopped":
            out.line(f"  {esc(row.service)}: {esc(row.detail)}")
        for note in row.notes:
            out.line(f"  {esc(row.service)}: {esc(note)}")
        if row.revision.state == "outdated" and row.revision.reasons:
            out.line(f"  {esc(row.service)}: changed since: {esc(', '.join(row.revision.reasons))}")
    host_rows = [
        [
            esc(h.host),
            esc(h.address),
            _styled(h.reach, REACH_STYLE.get(h.reach)),
            f"{h.healthy}/{h.services}",
            esc(memory_cell(h.memory)),
            esc((h.checkout_head or "-")[:10]),
            esc(h.detail + (f"; deploy lock held by {h.lock}" if h.lock else "")),
        ]
        for h in status.hosts
    ]
    out.table(None, HOST_COLUMNS, host_rows)
    for front in (status.gateway, status.proxy):
        if front is not None:
            front_table(out, front)
    for note in status.notes:
        out.line(f"[dim]{esc(note)}[/dim]")
