"""A swap group member's cold load, measured on its own before anything is timed.

Behind a llama-server router a member may be unloaded (or sleeping): the
first request then waits for the model to load, and that wait would land in
its time to first token. ``probe`` and ``bench`` call :func:`ensure_loaded`
first: when the router lists the model as not loaded it is loaded through
``POST /models/load`` (asked again while the router answers that every
slot is held by a busy or loading member; a sleeping one is woken by a
one-token request, as the router has no wake call) and the seconds until ``GET /models`` says
``loaded`` are returned as the member's cold-load figure. A server that is
not a router (no ``GET /models`` with a status per model) is left alone.

The router answers ``{"data": [{"id": ALIAS, "status": {"value": STATE, ...}}, ...]}``
(tools/server/README.md, b11434), STATE one of ``unloaded``, ``loading``,
``loaded``, ``sleeping`` (memory freed, the process kept) or ``downloading``;
a failed load is ``unloaded`` with ``failed: true``. The answer is outside
input: validated, bounded, and only the models asked about are reported.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferfleet.errors import ContractError
from inferfleet.io import http

POLL_S = 0.1
ROUTER_ROLE = "router"  # GET /props of a router says "role": "router" (its n_ctx is a 0)
MODEL_STATES = ("loaded", "loading", "sleeping", "unloaded", "downloading")
MAX_MODELS = 4096
MAX_BODY = 4 * 1024 * 1024


class _Status(BaseModel):
    model_config = ConfigDict(extra="ignore")
    value: str = Field(max_length=32)
    failed: bool = False


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(max_length=512)
    status: _Status


class _Models(BaseModel):
    model_config = ConfigDict(extra="ignore")
    data: list[_Model] = Field(max_length=MAX_MODELS)


def parse_models(body: bytes, aliases: Iterable[str]) -> dict[str, str]:
    """alias -> state for the declared members; ``missing`` for one the router does not list.

    Raises ValueError on an answer that is not the router's shape.
    """
    if len(body) > MAX_BODY:
        raise ValueError(f"GET /models answered {len(body)} bytes (more than {MAX_BODY})")
    try:
        models = _Models.model_validate_json(body)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"]
        raise ValueError(f"GET /models is not a router's model list: {msg}") from None
    found = {m.id: m.status for m in models.data}
    states: dict[str, str] = {}
    for alias in aliases:
        status = found.get(alias)
        if status is None:
            states[alias] = "missing"
        elif status.value not in MODEL_STATES:
            states[alias] = "unknown"
        else:
            states[alias] = "failed" if status.failed else status.value
    return states


@dataclass(frozen=True)
class ColdLoad:
    model: str
    before: str  # the member's state when asked: unloaded | sleeping | loading
    seconds: float  # until the router listed it as loaded


def _state(client: httpx.Client, model: str) -> str | None:
    try:
        answer = client.get("/models")
    except httpx.HTTPError:
        return None
    if answer.status_code != 200:
        return None
    try:
        return parse_models(answer.content, [model])[model]
    except ValueError:
        return None  # not a router's list: a single-model server


# The router refuses a load, rather than queueing it, while every slot is held by a
# member that is busy or still loading (server-models.cpp, b11434): 500 with this text.
LIMIT_REACHED = "model limit reached"


def _load(client: httpx.Client, model: str, deadline: float) -> None:
    """``POST /models/load``, asked again while the router says its slots are all held."""
    while True:
        answer = client.post("/models/load", json={"model": model})
        held = answer.status_code == 500 and LIMIT_REACHED in answer.text[:1000]
        if not held or time.monotonic() >= deadline:
            http.raise_for_status(answer, what="POST /models/load")
            return
        time.sleep(POLL_S)


def ensure_loaded(base_url: str, model: str, *, timeout_s: float = 600.0) -> ColdLoad | None:
    """Load ``model`` on a router if it is not loaded; None when it was (or no router)."""
    with http.client(timeout=timeout_s, base_url=base_url) as client:
        before = _state(client, model)
        if before in (None, "loaded", "missing"):
            return None
        start = time.monotonic()
        if before == "sleeping":
            wake = {"model": model, "prompt": " ", "n_predict": 1}
            http.raise_for_status(client.post("/completion", json=wake), what="wake request")
        deadline = start + timeout_s
        if before in ("unloaded", "failed"):
            _load(client, model, deadline)
        state: str | None = before
        while time.monotonic() < deadline:
            state = _state(client, model)
            if state == "loaded":
                return ColdLoad(model, before, time.monotonic() - start)
            if state == "failed" and before != "failed":
                break
            time.sleep(POLL_S)
    raise ContractError(
        f"the router did not load {model!r} (last state: {state})",
        where=base_url,
        hint="read the router's log: the member's own llama-server output is in it",
    )


def member_path(path: str, model: str) -> str:
    """A router's per-member route (``/props``, ``/slots``, ``/metrics``): proxied to the
    member's own server with ``?model=``; ``autoload=false`` so that reading a member's
    facts never loads it (and never swaps another one out)."""
    from urllib.parse import urlencode

    return f"{path}?{urlencode({'model': model, 'autoload': 'false'})}"
