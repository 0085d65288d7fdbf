"""The contract probe every deploy runs after the health gate (``apply``, ``deploy``, ``up``).

A healthy endpoint can still break its clients (a truncated window, a
wrong alias, a refused tool call); a deploy is done only once its contract
holds. The smallest honest proof, always run for an LLM service:

- the alias clients use is listed by ``/v1/models``;
- the per-slot context the server reports equals ``ctx_per_slot`` (L-25);
- a completion asked for 16 tokens returns 16 (counted by the server's own
  usage, never by chunks: L-51).

A service whose client facts promise more than text completions (tools,
a reasoning field, image input, reasoning_effort values: L-18, L-44 to
L-46) asks for the full probe (:func:`inferfleet.probe.contract.run_probe`)
as well; every check it fails is a failed contract check.

Nothing here raises for a broken contract: the result lists every check,
and its ``evidence`` lines say what failed, for the marker and the reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from inferfleet.client import reports
from inferfleet.errors import ContractError, FleetError
from inferfleet.fleetfile.fleet import ClientFacts
from inferfleet.io import http

COMPLETION_TOKENS = 16
DETAIL_CHARS = 300  # one evidence line stays readable in a table and a marker


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class ContractResult:
    checks: list[Check]
    full: bool = False  # the full probe ran too (the client facts asked for it)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def evidence(self) -> list[str]:
        """One line per failed check, first failure first."""
        return [f"{c.name}: {c.detail}" for c in self.failed]


def wants_full_probe(client: ClientFacts | None) -> bool:
    """Whether the service's client facts promise what only the full probe tests."""
    if client is None:
        return False
    return bool(
        client.tools
        or client.reasoning_field is not None
        or "image" in client.input
        or client.reasoning_effort
    )


def run_contract(
    base_url: str,
    *,
    alias: str,
    ctx_per_slot: int | None,
    service: str,
    parallel: int | None = None,
    client: ClientFacts | None = None,
    key: str | None = None,
) -> ContractResult:
    """The contract probe of one service: the minimal checks, then the full probe if asked.
    ``key``: the server's API key when it requires one (L-58)."""
    try:
        checks = run_minimal(
            base_url, alias=alias, ctx_per_slot=ctx_per_slot, service=service, key=key
        )
    except FleetError as exc:
        # The server is healthy (the gate passed) yet its API does not answer as
        # one: that is a broken contract with this evidence, not a crash.
        checks = [Check("contract probe", False, _short(exc.message))]
    full = wants_full_probe(client) and all(c.ok for c in checks)
    if full:
        checks += _full_probe(base_url, alias, ctx_per_slot, parallel, service, client, key)
    return ContractResult(checks, full=full)


def _full_probe(
    base_url: str,
    alias: str,
    ctx_per_slot: int | None,
    parallel: int | None,
    service: str,
    client: ClientFacts | None,
    key: str | None,
) -> list[Check]:
    from inferfleet.client.target import Target
    from inferfleet.probe.contract import run_probe

    target = Target(
        label=service,
        base_url=base_url,
        model=alias,
        service=service,
        ctx_per_slot=ctx_per_slot,
        parallel=parallel,
        client=client,
        key=key,
    )
    try:
        report = run_probe(target)
    except FleetError as exc:
        return [Check("full probe", False, _short(exc.message))]
    return [
        Check(f"probe {c.id}", c.status != "fail", _short(c.summary))
        for c in report.checks
        if c.status != "skip"
    ]


def run_minimal(
    base_url: str, *, alias: str, ctx_per_slot: int | None, service: str, key: str | None = None
) -> list[Check]:
    """The three minimal checks, every one reported (a failed check does not raise)."""
    checks: list[Check] = []
    with http.client(timeout=60.0, base_url=base_url, key=key) as client:
        models = _json(client.get("/v1/models"), "GET /v1/models", service)
        try:
            info = reports.openai_models(models, alias)
        except reports.AnswerError as exc:
            raise ContractError(exc.message, where=f"service {service}") from None
        ids = list(info.models or ())
        listed = alias in ids
        checks.append(
            Check(
                "alias listed", listed, _short(f"/v1/models lists {ids}, clients ask for {alias!r}")
            )
        )
        reported = info.ctx_per_slot
        if ctx_per_slot is not None and reported is not None:
            # llama.cpp's meta.n_ctx or vLLM's max_model_len: the window of one slot.
            checks.append(
                Check(
                    "context per slot",
                    reported == ctx_per_slot,
                    f"server reports n_ctx {reported} per slot, fleet file says "
                    f"{ctx_per_slot} (L-25)",
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
        got = usage.get("completion_tokens") if isinstance(usage, dict) else None
        checks.append(
            Check(
                f"completion of {COMPLETION_TOKENS} tokens",
                got == COMPLETION_TOKENS,
                _short(f"usage.completion_tokens = {got!r}"),
            )
        )
        if ctx_per_slot is not None and not any(c.name == "context per slot" for c in checks):
            # A router lists members without their window: the member's own /props has it
            # (read after the completion, which loaded the member).
            router, reported = _member_window(client, alias)
            if reported is not None:
                checks.insert(
                    1,
                    Check(
                        "context per slot",
                        reported == ctx_per_slot,
                        f"the router's member {alias!r} reports n_ctx {reported} per slot "
                        f"(/props?model=), fleet file says {ctx_per_slot} (L-25)",
                    ),
                )
            elif router is not False:
                # Never a silent pass: a window the gate cannot read is not checked (L-25),
                # nor is one of a server whose /props never answered.
                unread = (
                    f"the router's member {alias!r} did not report its window (/props?model=)"
                    if router
                    else "the server's /props did not answer (is it a router?)"
                )
                checks.insert(
                    1,
                    Check(
                        "context per slot",
                        False,
                        f"{unread} after answering; fleet file says {ctx_per_slot}",
                    ),
                )
    return checks


# A member that just answered may take a moment to show as loaded in the router's
# per-member routes (more so on a busy host): a few short tries before giving up.
MEMBER_TRIES = 15
MEMBER_PAUSE_S = 0.2


def _member_window(client: httpx.Client, alias: str) -> tuple[bool | None, int | None]:
    """(is this a router: None when its /props never answered, the member's per-slot
    window from its own /props or None)."""
    from inferfleet.client.router import ROUTER_ROLE, member_path

    router: bool | None = None
    for attempt in range(MEMBER_TRIES):
        if attempt:
            time.sleep(MEMBER_PAUSE_S)
        try:
            own = client.get("/props")
            if own.status_code < 500:  # 404: a server without /props is not a router
                router = own.status_code == 200 and own.json().get("role") == ROUTER_ROLE
                break
        except (httpx.HTTPError, ValueError, AttributeError):
            continue  # a busy router answers late or not at all for a moment: ask again
    if not router:
        return router, None
    for attempt in range(MEMBER_TRIES):
        if attempt:
            time.sleep(MEMBER_PAUSE_S)
        try:
            member = client.get(member_path("/props", alias))
            found = reports.llamacpp_props(member.json()) if member.is_success else None
        except (httpx.HTTPError, ValueError):  # AnswerError is a ValueError
            # A router that just switched members may drop the kept-alive connection:
            # ask again rather than skip the window.
            continue
        if found is not None and found.ctx_per_slot is not None:
            return True, found.ctx_per_slot
    # Still no answer: reported as a window not read, never skipped (L-25).
    return True, None


def _short(text: str) -> str:
    """One line, bounded: server text ends up in markers, tables and JSON."""
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= DETAIL_CHARS else flat[: DETAIL_CHARS - 3] + "..."


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
