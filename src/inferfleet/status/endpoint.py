"""Reading one endpoint over HTTP: health, slots, metrics, version and model.

Each runtime answers a few cheap GETs (llama.cpp: ``/slots``, ``/props``,
``/v1/models``, ``/metrics``; vLLM: ``/version``; SGLang:
``/get_server_info``). A request that fails, or an answer that does not
parse, becomes a note on the reading: the status table shows what could be
read and says what could not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from inferfleet.client import reports
from inferfleet.client.reports import AnswerError, ServerInfo, SlotUsage
from inferfleet.io import http
from inferfleet.runtimes.registry import traits


@dataclass(frozen=True)
class Reading:
    health: str  # healthy | loading | unhealthy | down
    detail: str = ""
    slots: SlotUsage | None = None
    series: dict[str, float] | None = None
    metrics: str = "-"
    info: ServerInfo = field(default_factory=ServerInfo)
    notes: list[str] = field(default_factory=list)


# A keyed server (L-58) whose key this machine does not have: the service's secrets_env
# on its own host, else INFERFLEET_KEY_<SERVICE> in the environment (client.keys).
KEY_HINT = " (it requires its API key: set INFERFLEET_KEY_<SERVICE> here, L-58)"


def read(
    client: httpx.Client,
    base: str,
    *,
    runtime: str | None,
    health_path: str,
    metrics_on: bool,
) -> Reading:
    """Everything ``base`` (``http://host:port``) says about itself; never raises for it."""
    try:
        answer = client.get(base + health_path)
    except httpx.TransportError as exc:
        return Reading("down", f"{health_path}: {http.failure_reason(exc)}")
    health = reports.health_state(answer.status_code)
    detail = "" if health == "healthy" else f"{health_path}: HTTP {answer.status_code}"
    notes: list[str] = []
    if health == "loading":
        # Everything else answers 503 too while the model loads (L-34).
        return Reading(health, detail)

    slot_usage = None
    infos: list[ServerInfo] = []
    if runtime is not None and traits(runtime).slots_endpoint:
        slot_usage = _get(client, base, "/slots", reports.slots, notes)
        infos.append(_get(client, base, "/props", reports.llamacpp_props, notes) or ServerInfo())
    elif runtime is not None and (path := traits(runtime).info_path) is not None:
        found = _get(client, base, path, lambda d: reports.release_version(d, path), notes)
        infos.append(found or ServerInfo())
    if runtime is not None:
        infos.append(_get(client, base, "/v1/models", reports.openai_models, notes) or ServerInfo())

    series = None
    state = "off (fleet)"
    if metrics_on:
        series, state = _metrics(client, base, notes)
    return Reading(health, detail, slot_usage, series, state, reports.merge(*infos), notes)


def _get(client: httpx.Client, base: str, path: str, parser: Any, notes: list[str]) -> Any:
    try:
        answer = client.get(base + path)
    except httpx.TransportError as exc:
        notes.append(f"{path}: {http.failure_reason(exc)}")
        return None
    if answer.status_code != 200:
        hint = (
            " (the server runs with --no-slots)"
            if path == "/slots" and answer.status_code == 501
            else KEY_HINT
            if answer.status_code == 401
            else ""
        )
        notes.append(f"{path}: HTTP {answer.status_code}{hint}")
        return None
    try:
        return parser(reports.load_json(answer.content, path))
    except AnswerError as exc:
        notes.append(exc.message)
        return None


def _metrics(
    client: httpx.Client, base: str, notes: list[str]
) -> tuple[dict[str, float] | None, str]:
    try:
        answer = client.get(base + "/metrics")
    except httpx.TransportError as exc:
        return None, f"error: {http.failure_reason(exc)}"
    if answer.status_code == 501:
        # L-56: the server was started without its metrics flag; Prometheus loses it silently.
        notes.append("/metrics: HTTP 501: started without its metrics flag (L-56)")
        return None, "HTTP 501 (L-56)"
    if answer.status_code == 401:
        notes.append(f"/metrics: HTTP 401{KEY_HINT}")
    if answer.status_code != 200:
        return None, f"HTTP {answer.status_code}"
    try:
        return reports.metrics(answer.text), "ok"
    except AnswerError as exc:
        notes.append(exc.message)
        return None, "unparsable"
