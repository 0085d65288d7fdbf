"""Check results with their evidence, and the HTTP exchange that collects it.

Every check says pass, fail or skip *and shows why*: the request it sent,
the status it got and the part of the answer that decided. A reader can
replay the request with curl and see the same thing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from inferfleet.documents import ProbeCheck, ProbeEvidence, ProbeFindings, document_of
from inferfleet.io import http

Status = Literal["pass", "fail", "skip"]
EXCERPT = 400  # characters of a body kept as evidence


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Evidence:
    request: str  # "POST /v1/completions"
    body: str  # the request body, abridged
    status: int | None  # None: no answer (connection refused, timeout)
    answer: str  # the deciding part of the answer


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    lesson: str | None
    status: Status
    summary: str
    evidence: tuple[Evidence, ...] = ()
    hint: str = ""

    def to_json(self) -> ProbeCheck:
        return document_of(
            ProbeCheck,
            self,
            evidence=[document_of(ProbeEvidence, e) for e in self.evidence],
        )


@dataclass
class Findings:
    """What the probe learned about the endpoint; the client config is checked against it."""

    model: str | None = None
    runtime: str | None = None  # "llama.cpp" | "vllm" | "sglang" | None
    n_ctx_slot: int | None = None
    total_slots: int | None = None
    modalities: list[str] = field(default_factory=list)
    timings_in_body: bool = False
    server_timing: dict[str, float] = field(default_factory=dict)
    reasoning_field: str | None = None
    content_null_on_budget: bool | None = None
    efforts_accepted: list[str] = field(default_factory=list)
    efforts_refused: dict[str, int | None] = field(default_factory=dict)
    effort_map: dict[str, str] = field(default_factory=dict)
    tools_ok: bool | None = None
    vision_ok: bool | None = None
    metrics_ok: bool | None = None

    def to_json(self) -> ProbeFindings:
        return document_of(ProbeFindings, self)


@dataclass
class Answer:
    method: str
    path: str
    body: dict[str, Any] | None
    status: int | None
    text: str
    headers: httpx.Headers
    elapsed_ms: float
    error: str | None = None

    @property
    def data(self) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            return None

    @property
    def obj(self) -> dict[str, Any]:
        data = self.data
        return data if isinstance(data, dict) else {}

    def evidence(self, answer: Any | None = None) -> Evidence:
        shown = answer if answer is not None else (self.error or self.text)
        return Evidence(
            request=f"{self.method} {self.path}",
            body=excerpt(self.body) if self.body is not None else "",
            status=self.status,
            answer=excerpt(shown),
        )


class Exchange:
    """Requests that never raise: an unreachable server is an answer with no status."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def get(self, path: str) -> Answer:
        return self._send("GET", path, None)

    def post(self, path: str, body: dict[str, Any]) -> Answer:
        return self._send("POST", path, body)

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> Answer:
        start = time.perf_counter()
        try:
            try:
                response = self.client.request(method, path, json=body)
            except httpx.HTTPError as exc:
                if not http.is_stale_connection(exc):
                    raise
                start = time.perf_counter()  # never reached the server: once more
                response = self.client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            return Answer(
                method,
                path,
                body,
                None,
                "",
                httpx.Headers(),
                (time.perf_counter() - start) * 1e3,
                error=f"{type(exc).__name__}: {exc}",
            )
        return Answer(
            method,
            path,
            body,
            response.status_code,
            response.text,
            response.headers,
            (time.perf_counter() - start) * 1e3,
        )
