"""Pure parsers for what a running server says about itself: window, slots, version,
model ids, metrics.

The one reading of these answers for ``status``, ``probe`` and the contract gate
``up``/``apply`` run (:mod:`inferfleet.probe.minimal`). Each takes the bytes (or
decoded JSON) an endpoint answered and returns plain data, or raises
:class:`AnswerError` saying what was wrong with the answer. Nothing here does
I/O, so every parser is tested with captured and hostile answers. ``status``
turns an ``AnswerError`` into a note on the service's row: one odd endpoint
never stops the table.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from inferfleet.errors import FleetError

MAX_METRICS_BYTES = 8 * 1024 * 1024  # vLLM's histograms are large; a runaway body is not


class AnswerError(FleetError, ValueError):
    """An endpoint answered something that is not what its runtime sends."""


@dataclass(frozen=True)
class SlotUsage:
    total: int
    busy: int
    ctx_per_slot: int | None  # n_ctx of the slots (L-25: the per-slot window)


@dataclass(frozen=True)
class ServerInfo:
    version: str | None = None  # build (llama.cpp) or release (vLLM, SGLang)
    model: str | None = None  # the id clients use
    ctx_per_slot: int | None = None
    slots: int | None = None
    models: tuple[str, ...] | None = None  # every id /v1/models lists


def health_state(status: int) -> str:
    """A health answer's state: 200 healthy, 503 loading (L-34), anything else unhealthy."""
    if status == 200:
        return "healthy"
    if status == 503:
        return "loading"
    return "unhealthy"


def load_json(body: bytes | str, what: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AnswerError(f"{what} is not JSON ({exc})") from None


def metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition -> series name -> value summed over its label sets.

    Summing is what the fleet view wants: llama.cpp has one sample per name,
    vLLM one per model name, and "requests waiting" is their total.
    Malformed lines are an error, not skipped, so a proxy's HTML page or a
    truncated body is reported instead of read as zeros.
    """
    if len(text) > MAX_METRICS_BYTES:
        raise AnswerError(f"/metrics answered {len(text)} bytes, more than any runtime sends")
    found: dict[str, float] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, rest = _split_name(line, number)
        parts = rest.split()
        if not parts or len(parts) > 2:
            raise AnswerError(f"/metrics line {number} is not `name value`: {line[:80]!r}")
        try:
            value = float(parts[0])
        except ValueError:
            raise AnswerError(
                f"/metrics line {number} has a value that is not a number: {parts[0][:40]!r}"
            ) from None
        if math.isnan(value):
            continue
        found[name] = found.get(name, 0.0) + value
    return found


def _split_name(line: str, number: int) -> tuple[str, str]:
    """The series name and what follows its label set (quoted values may hold `}` or spaces)."""
    end = 0
    while end < len(line) and line[end] not in "{ \t":
        end += 1
    name = line[:end]
    if not name or not all(c.isalnum() or c in "_:" for c in name):
        raise AnswerError(
            f"/metrics line {number} does not start with a series name: {line[:80]!r}"
        )
    if end < len(line) and line[end] == "{":
        quoted = False
        i = end + 1
        while i < len(line):
            char = line[i]
            if quoted and char == "\\":
                i += 2
                continue
            if char == '"':
                quoted = not quoted
            elif char == "}" and not quoted:
                return name, line[i + 1 :]
            i += 1
        raise AnswerError(f"/metrics line {number} has an unterminated label set: {line[:80]!r}")
    return name, line[end:]


def slots(data: Any) -> SlotUsage:
    """llama.cpp ``/slots``: one object per slot with ``is_processing`` and ``n_ctx``."""
    if not isinstance(data, list) or not data:
        raise AnswerError("/slots is not a non-empty list of slots")
    busy = 0
    windows: set[int] = set()
    for index, slot in enumerate(data):
        if not isinstance(slot, dict):
            raise AnswerError(f"/slots entry {index} is not an object")
        processing = slot.get("is_processing")
        if not isinstance(processing, bool):
            raise AnswerError(f"/slots entry {index} has no boolean is_processing")
        busy += processing
        n_ctx = slot.get("n_ctx")
        if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
            windows.add(n_ctx)
    # Slots of one server share the window; if they ever differ, the smallest
    # is the contract a client can rely on (L-25).
    return SlotUsage(len(data), busy, min(windows) if windows else None)


def window(value: Any) -> int | None:
    """A per-slot window as a server reports it: a positive int (a router's placeholder
    is 0, and JSON's true is no number)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def llamacpp_props(data: Any) -> ServerInfo:
    """llama.cpp ``/props``: ``build_info`` (e.g. ``b11434-b11434``), ``total_slots`` and
    the per-slot window (``default_generation_settings.n_ctx``)."""
    if not isinstance(data, dict):
        raise AnswerError("/props is not an object")
    build = data.get("build_info")
    total = data.get("total_slots")
    settings = data.get("default_generation_settings")
    return ServerInfo(
        version=build if isinstance(build, str) and build else None,
        slots=total if isinstance(total, int) and not isinstance(total, bool) else None,
        ctx_per_slot=window(settings.get("n_ctx")) if isinstance(settings, dict) else None,
    )


def openai_models(data: Any, model: str | None = None) -> ServerInfo:
    """``/v1/models``: the ids it lists, and one model's id and window.

    The model is ``model`` where it is listed; else the only one served, or
    (``model`` None: a bare URL) the first. llama.cpp puts the per-slot window
    in ``meta.n_ctx``; vLLM puts it in ``max_model_len`` (L-25).
    """
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise AnswerError("/v1/models has no data list")
    entries = [e for e in data["data"] if isinstance(e, dict)]
    ids = tuple(str(e.get("id")) for e in entries)
    chosen = [e for e in entries if model is not None and e.get("id") == model]
    if not chosen and (model is None or len(entries) == 1):
        chosen = entries[:1]
    if not chosen:
        return ServerInfo(models=ids)
    entry = chosen[0]
    meta = entry.get("meta")
    found = window(meta.get("n_ctx")) if isinstance(meta, dict) else None
    return ServerInfo(
        model=entry.get("id") if isinstance(entry.get("id"), str) else None,
        ctx_per_slot=found or window(entry.get("max_model_len")),
        models=ids,
    )


def release_version(data: Any, what: str) -> ServerInfo:
    """vLLM ``/version`` and SGLang ``/get_server_info``: a ``version`` string."""
    if not isinstance(data, dict):
        raise AnswerError(f"{what} is not an object")
    version = data.get("version")
    return ServerInfo(version=version if isinstance(version, str) and version else None)


def merge(*infos: ServerInfo) -> ServerInfo:
    """The first value each field has among ``infos``."""

    def first(field: str) -> Any:
        return next((getattr(i, field) for i in infos if getattr(i, field) is not None), None)

    return ServerInfo(
        version=first("version"),
        model=first("model"),
        ctx_per_slot=first("ctx_per_slot"),
        slots=first("slots"),
        models=first("models"),
    )
