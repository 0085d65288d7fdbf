"""The minimal contract check `inferfleet up` runs after the health gate.

A healthy endpoint can still break its clients; these three checks are the
smallest honest proof that the fleet file's promises hold:

- the alias clients use is listed by ``/v1/models``;
- the per-slot context the server reports equals ``ctx_per_slot`` (L-25);
- a completion asked for 16 tokens returns 16 (counted by the server's own
  usage, never by chunks: L-51).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from inferfleet.errors import ContractError
from inferfleet.io import http

COMPLETION_TOKENS = 16


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def run_minimal(
    base_url: str, *, alias: str, ctx_per_slot: int | None, service: str
) -> list[Check]:
    checks: list[Check] = []
    with http.client(timeout=60.0, base_url=base_url) as client:
        models = _json(client.get("/v1/models"), "GET /v1/models", service)
        entries = models.get("data") or []
        ids = [str(m.get("id")) for m in entries if isinstance(m, dict)]
        listed = alias in ids
        checks.append(Check("alias listed", listed, f"/v1/models lists {ids}"))
        if ctx_per_slot is not None:
            reported = _reported_ctx(entries, alias)
            if reported is not None:
                checks.append(
                    Check(
                        "context per slot",
                        reported == ctx_per_slot,
                        f"server reports n_ctx {reported} per slot, fleet file says {ctx_per_slot}",
                    )
                )
        body = {
            "model": alias,
            "prompt": "The three primary colours are",
            "max_tokens": COMPLETION_TOKENS,
            "temperature": 0,
            # A base model may emit EOS early; the check is about the count.
            "ignore_eos": True,
        }
        answer = _json(client.post("/v1/completions", json=body), "POST /v1/completions", service)
        usage = answer.get("usage") or {}
        got = usage.get("completion_tokens")
        checks.append(
            Check(
                f"completion of {COMPLETION_TOKENS} tokens",
                got == COMPLETION_TOKENS,
                f"usage.completion_tokens = {got}",
            )
        )
    failed = [c for c in checks if not c.ok]
    if failed:
        raise ContractError(
            "; ".join(f"{c.name}: {c.detail}" for c in failed),
            where=f"service {service}",
            hint="the endpoint is healthy but does not honour the fleet file; check the argv "
            "(inferfleet show SERVICE) and the server log",
        )
    return checks


def _reported_ctx(entries: list[Any], alias: str) -> int | None:
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == alias:
            meta = entry.get("meta")
            if isinstance(meta, dict) and isinstance(meta.get("n_ctx"), int):
                return int(meta["n_ctx"])
    return None


def _json(response: httpx.Response, what: str, service: str) -> dict[str, Any]:
    http.raise_for_status(response, what=what)
    try:
        data = response.json()
    except ValueError:
        raise ContractError(
            f"{what} did not answer JSON: {response.text[:200]!r}", where=f"service {service}"
        ) from None
    if not isinstance(data, dict):
        raise ContractError(f"{what} answered {type(data).__name__}, not an object", where=service)
    return data
