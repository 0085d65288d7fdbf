"""Client contract rules: the window clients are told about (L-25, L-26, L-45)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import Hit, Subject, header_rule, service_rule
from inferfleet.gguf import Inspection
from inferfleet.render.endpoints import compaction_threshold


@service_rule("client-window-overflow", "L-26", "error")
def window_overflow(s: Subject) -> Iterator[Hit]:
    """max_tokens plus the compaction threshold do not fit the per-slot window"""
    window = s.service.ctx_per_slot or 0
    tokens = s.service.client.max_tokens
    threshold = compaction_threshold(s.service)
    if tokens >= window or tokens + threshold > window:
        problem = (
            f"max_tokens {tokens} leaves no room for a prompt in"
            if tokens >= window
            else f"max_tokens {tokens} + compaction threshold {threshold} overflow"
        )
        yield s.hit(
            "client.max_tokens",
            f"service {s.name!r}: {problem} the per-slot window {window}",
            "the window is ctx_per_slot, not the pool; lower max_tokens or "
            "client.compaction_threshold, or raise ctx_per_slot",
        )


@service_rule("reasoning-field-mismatch", "L-45", "warning")
def reasoning_field(s: Subject) -> Iterator[Hit]:
    """clients are told reasoning lands in a field this runtime does not use"""
    said = s.service.client.reasoning_field
    actual = s.traits.reasoning_field
    if said is not None and said != actual:
        yield s.hit(
            "client.reasoning_field",
            f"service {s.name!r} says reasoning is in {said!r}, but {s.runtime.kind} puts it "
            f"in {actual!r}",
            f"set reasoning_field: {actual} (or leave it out: it follows the runtime)",
        )


@header_rule("context-beyond-training", "L-25", "warning")
def beyond_training(s: Subject, model: str, facts: Inspection) -> Iterator[Hit]:
    """the per-slot window is longer than the model was trained for"""
    trained = facts.context_length
    if trained and (s.service.ctx_per_slot or 0) > trained:
        yield s.hit(
            "ctx_per_slot",
            f"service {s.name!r}: ctx_per_slot {s.service.ctx_per_slot} exceeds the model's "
            f"trained context {trained}",
            f"lower ctx_per_slot to {trained}, or configure rope scaling explicitly",
        )
