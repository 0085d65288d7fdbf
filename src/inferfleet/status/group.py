"""Which members of a swap group are loaded: llama-server's router ``GET /models``
(read by :func:`inferfleet.client.router.parse_models`), reported by alias."""

from __future__ import annotations

import httpx

from inferfleet.client.router import parse_models
from inferfleet.io import http


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
