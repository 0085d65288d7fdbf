"""Documents of ``up``, ``down`` and ``status``."""

from __future__ import annotations

from typing import (
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


class MinimalCheck(TypedDict):
    name: str
    ok: bool
    detail: str


class UpService(TypedDict):
    service: str
    action: str  # started | restarted | unchanged | held (stop --hold: left down)
    url: str
    pid: int | None  # None for a systemd / Quadlet service (its unit owns the process)
    model: str
    ctx_per_slot: int
    parallel: int
    seconds_to_healthy: float | None
    checks: list[MinimalCheck]
    reason: str
    revision: str  # the checkout's HEAD, or "untracked" outside a clean git checkout
    health: Literal["healthy", "held"]
    contract: str  # passed | failing | skipped; "" for a kept service not probed again
    evidence: list[str]  # the failed contract checks, first first


class UpFront(TypedDict):
    """A front-door part (the gateway, the auth proxy) ``up`` brought up after the services."""

    name: str  # gateway | proxy
    action: str  # started | restarted | unchanged
    url: str  # what clients use: the gateway's base URL (.../v1), the proxy's https://name:port
    pid: int | None
    engine: str  # "litellm 1.106.12", "caddy v2.11.7"
    seconds_to_healthy: float | None
    reason: str
    root: str  # the proxy's local CA root clients trust (tls internal), else ""
    unhealthy_backends: list[str]  # the gateway's fronted services not healthy at its start


class UpDocument(TypedDict):
    schema: Literal["inferfleet.up/v1"]
    file: str
    services: list[UpService]
    pending: NotRequired[list[str]]  # not started: an earlier service's contract failed
    gateway: NotRequired[UpFront]  # when the fleet's gateway runs on this machine
    proxy: NotRequired[UpFront]  # when the fleet's auth proxy runs on this machine


class DownService(TypedDict):
    service: str
    outcome: str  # terminated | killed | gone | stale | not-running
    pid: int | None
    detail: str


class DownDocument(TypedDict):
    schema: Literal["inferfleet.down/v1"]
    services: list[DownService]


class RevisionInfo(TypedDict):
    state: str  # status.model.REVISION_STATES
    deployed: str | None
    head: str | None
    applied_at: float | None
    reasons: list[str]


class BenchLevelFigures(TypedDict):
    concurrency: int
    decode_tps: float | None
    aggregate_tps: float | None
    ttft_ms: float | None
    draft_acceptance: float | None  # accepted / drafted tokens, where a drafter ran


class BenchFiguresInfo(TypedDict):
    summary: str
    finished_at: str
    arm: str
    api: str | None
    max_tokens: int | None
    levels: list[BenchLevelFigures]


class StatusService(TypedDict):
    service: str
    host: str
    kind: str
    runtime: str | None
    backend: str
    state: str  # status.model.STATES
    url: str
    links: dict[str, str]
    detail: str
    pid: int | None
    pid_source: str | None
    uptime_s: float | None
    runtime_version: str | None
    model: str | None
    ctx_per_slot: int | None
    parallel: int | None
    slots: int | None
    busy_slots: int | None
    requests_processing: float | None
    requests_deferred: float | None
    metrics: str
    revision: RevisionInfo
    bench: BenchFiguresInfo | None
    notes: list[str]
    members: dict[str, str]  # a swap group's members by alias: loaded | sleeping | unloaded ...


class StatusHost(TypedDict):
    host: str
    address: str
    local: bool
    reach: str  # local | ssh | http | unreachable
    detail: str
    checkout_head: str | None
    lock: str | None
    services: int
    healthy: int
    # Bytes in use per device where the host can tell (nvidia:0, amd:1 from nvidia-smi or
    # sysfs; ram: MemTotal - MemAvailable); empty when nothing was read.
    memory: dict[str, int]


class StatusGateway(TypedDict):
    """The gateway's row: up or not, and which fronted backends it reaches."""

    host: str
    url: str  # the base URL clients use (.../v1)
    state: str  # healthy | degraded | down | unhealthy | foreign
    pid: int | None
    engine: str | None  # "litellm 1.106.12" (this machine's record)
    backends: dict[str, str]  # service -> ok | the error LiteLLM reports
    unreachable: list[str]  # services it cannot reach
    detail: str


class StatusProxy(TypedDict):
    """The auth proxy's row: Caddy up or not, and whether its upstreams answer."""

    host: str
    url: str  # https://name:port
    state: str  # healthy | degraded | down | unhealthy | foreign
    pid: int | None
    engine: str | None  # "caddy v2.11.7" (this machine's record)
    upstreams: dict[str, str]  # gateway or service -> ok | what answered through Caddy
    detail: str


class StatusDocument(TypedDict):
    """``status --json`` and the board's ``/api/status`` (which adds ``inferfleet``)."""

    schema: Literal["inferfleet.status/v2"]
    inferfleet: NotRequired[str]  # the board's version stamp
    ok: bool  # every service in scope healthy (or held), the front door too: exit 0
    file: str
    head: str | None
    collected_at: float
    hosts: list[StatusHost]
    services: list[StatusService]
    notes: list[str]
    gateway: NotRequired[StatusGateway]  # when the fleet declares one
    proxy: NotRequired[StatusProxy]  # when the fleet declares one
