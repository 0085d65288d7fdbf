"""Which members of a swap group are loaded: llama-server's router ``GET /models``.

The router answers ``{"data": [{"id": ALIAS, "status": {"value": STATE, ...}}, ...]}``
(tools/server/README.md, b11434), STATE one of ``unloaded``, ``loading``,
``loaded``, ``sleeping`` (memory freed, the process kept) or ``downloading``;
a failed load is ``unloaded`` with ``failed: true``. The answer is outside
input: validated, bounded, and only the members the fleet declares are
reported (by their alias, as clients name them).
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferfleet.io import http

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


def member_states(base_url: str, aliases: list[str], timeout: float) -> dict[str, str] | str:
    """The members' states, or why they could not be read."""
    try:
        with http.client(timeout=timeout) as client:
            answer = client.get(f"{base_url}/models")
    except httpx.HTTPError as exc:
        return f"GET /models failed: {type(exc).__name__}"
    if answer.status_code != 200:
        return f"GET /models answered {answer.status_code}"
    try:
        return parse_models(answer.content, aliases)
    except ValueError as exc:
        return str(exc)


def summary(states: dict[str, str]) -> str:
    """``loaded: a; sleeping: b`` (unloaded members are left out)."""
    parts = []
    for state in ("loaded", "loading", "sleeping", "failed", "missing", "unknown"):
        names = [alias for alias, s in states.items() if s == state]
        if names:
            parts.append(f"{state}: {', '.join(names)}")
    return "; ".join(parts) or "no member loaded"
