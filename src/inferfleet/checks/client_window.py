"""Client contract rules: the window clients are told about (L-25, L-26, L-45)."""

from __future__ import annotations

from collections.abc import Iterator

from inferfleet.checks.engine import CheckContext, Hit, Skip, rule
from inferfleet.render.endpoints import compaction_threshold
from inferfleet.runtimes.registry import traits


@rule(
    "client-window-overflow",
    "L-26",
    "error",
    "max_tokens plus the compaction threshold do not fit the per-slot window",
)
def window_overflow(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, _ in ctx.llm():
        window = service.ctx_per_slot or 0
        tokens = service.client.max_tokens
        threshold = compaction_threshold(service)
        if tokens >= window or tokens + threshold > window:
            problem = (
                f"max_tokens {tokens} leaves no room for a prompt in"
                if tokens >= window
                else f"max_tokens {tokens} + compaction threshold {threshold} overflow"
            )
            yield Hit(
                name,
                f"services.{name}.client.max_tokens",
                f"service {name!r}: {problem} the per-slot window {window}",
                "the window is ctx_per_slot, not the pool; lower max_tokens or "
                "client.compaction_threshold, or raise ctx_per_slot",
            )


@rule(
    "reasoning-field-mismatch",
    "L-45",
    "warning",
    "clients are told reasoning lands in a field this runtime does not use",
)
def reasoning_field(ctx: CheckContext) -> Iterator[Hit]:
    for name, service, runtime in ctx.llm():
        said = service.client.reasoning_field
        actual = traits(runtime.kind).reasoning_field
        if said is not None and said != actual:
            yield Hit(
                name,
                f"services.{name}.client.reasoning_field",
                f"service {name!r} says reasoning is in {said!r}, but {runtime.kind} puts it "
                f"in {actual!r}",
                f"set reasoning_field: {actual} (or leave it out: it follows the runtime)",
            )


@rule(
    "context-beyond-training",
    "L-25",
    "warning",
    "the per-slot window is longer than the model was trained for",
    header=True,
)
def beyond_training(ctx: CheckContext) -> Iterator[Hit | Skip]:
    for name, service, runtime in ctx.llm():
        if not traits(runtime.kind).gguf or service.model is None:
            continue
        facts = ctx.header(service.model)
        if isinstance(facts, str):
            yield Skip(name, facts)
            continue
        trained = facts.context_length
        if trained and (service.ctx_per_slot or 0) > trained:
            yield Hit(
                name,
                f"services.{name}.ctx_per_slot",
                f"service {name!r}: ctx_per_slot {service.ctx_per_slot} exceeds the model's "
                f"trained context {trained}",
                f"lower ctx_per_slot to {trained}, or configure rope scaling explicitly",
            )
