"""The state one probe run shares between its checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferfleet.client.target import Target
from inferfleet.probe.evidence import Exchange, Findings

# Small generations keep the probe quick on a CPU; the counts still prove the contract.
PROBE_TOKENS = 16


@dataclass
class Session:
    target: Target
    exchange: Exchange
    model: str | None  # a bare URL's is read from /v1/models by the alias check
    findings: Findings = field(default_factory=Findings)
    props: dict[str, Any] = field(default_factory=dict)  # llama.cpp /props, when served
    # A llama-server router (swap group): a member's /props, /slots and /metrics are read
    # through the router with ?model= (client.router.member_path).
    router: bool = False
    # Every `timings` object and Server-Timing header the answers carried (L-50, L-51).
    timings_seen: list[tuple[str, dict[str, Any], int | None]] = field(default_factory=list)
    server_timing_seen: list[str] = field(default_factory=list)
    # A drafter's (drafted, accepted) counters in /metrics before the first answer, where
    # the server counts them there (vLLM) instead of per answer.
    draft_counters: tuple[int, int] | None = None

    def chat_body(
        self, content: Any, max_tokens: int = PROBE_TOKENS, **extra: Any
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens,
        }
        body.update(extra)
        return body

    def completion_body(
        self, prompt: Any, max_tokens: int = PROBE_TOKENS, **extra: Any
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens}
        body.update(extra)
        return body
