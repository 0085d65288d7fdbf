"""One place that knows every runtime: its argv builder and its traits.

Renderers and checks ask here instead of switching on ``runtime.kind``
themselves; each adapter module exports its own ``TRAITS``, so adding a
runtime means one adapter module and its ``TRAITS`` in ``_TRAITS``.
"""

from __future__ import annotations

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
