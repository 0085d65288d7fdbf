"""One place that knows every runtime: its argv builder and its traits.

Renderers and checks ask here instead of switching on ``runtime.kind``
themselves; each adapter module exports its own ``TRAITS``, so adding a
runtime means one adapter module and its ``TRAITS`` in ``_TRAITS``.
"""

from __future__ import annotations

from collections.abc import Mapping

from inferfleet.runtimes import llamacpp, sglang, vllm
from inferfleet.runtimes.base import AdapterError, RuntimeTraits

__all__ = ["RuntimeTraits", "every", "takes_cache_type", "traits"]

_TRAITS = {t.kind: t for t in (llamacpp.TRAITS, vllm.TRAITS, sglang.TRAITS)}


def traits(kind: str) -> RuntimeTraits:
    try:
        return _TRAITS[kind]
    except KeyError:
        raise AdapterError(
            f"no adapter for runtime kind {kind!r}", hint=f"known: {', '.join(sorted(_TRAITS))}"
        ) from None


def every() -> tuple[RuntimeTraits, ...]:
    """Every runtime's traits, for answers that must be matched to their runtime."""
    return tuple(_TRAITS.values())


def takes_cache_type(kind: str, cache_type: str) -> bool:
    return cache_type in traits(kind).cache_types


def draft_counts(series: Mapping[str, float]) -> tuple[int, int] | None:
    """(drafted, accepted) tokens so far by a runtime that counts them in /metrics, from
    its parsed series; None where no such counters are served (no drafter, or a runtime
    that reports them per answer)."""
    for kind in every():
        drafted, accepted = kind.metrics.draft_tokens, kind.metrics.accepted_tokens
        if drafted in series and accepted in series:
            assert drafted is not None and accepted is not None
            return int(series[drafted]), int(series[accepted])
    return None
