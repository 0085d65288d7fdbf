"""Real traffic as a bench battery: a JSONL file of chat requests, replayed.

The battery measures every arm on the same public prose and code; an
operator's own traffic measures it on what the fleet is really asked (a
drafter's acceptance depends on the text, L-48). Each line is one JSON
object holding the request's ``messages``: an OpenAI chat request body (what
a client sends, or the gateway logs), or LiteLLM's standard logging payload
(``messages`` with ``model_parameters``) as its logging callbacks write it.
``max_tokens`` (or ``max_completion_tokens``) is kept per request where the
line has it; every other parameter (model, tools, sampling) is dropped, so
each arm answers the same conversation under the bench's own settings.

The file is hostile input: bounded in size, lines and depth; every message
typed. Each replayed request is still salted at its very start, so the
prefix cache of one arm never serves another's prefill (L-47).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferfleet.bench.battery import Battery, Prompt
from inferfleet.bounded import parse_json, read_bounded
from inferfleet.errors import UsageError

MAX_BYTES = 64 << 20
MAX_REQUESTS = 10_000
MAX_LINE_BYTES = 4 << 20
MAX_MESSAGES = 512
MAX_TOKENS = 32_768
ROLES = frozenset({"system", "developer", "user", "assistant"})
HINT = (
    'one JSON object a line, e.g. {"messages": [{"role": "user", "content": "..."}], '
    '"max_tokens": 256}'
)


@dataclass(frozen=True)
class Replayed:
    """One request of the file: its conversation and its own answer length."""

    messages: tuple[tuple[str, str], ...]  # (role, text)
    max_tokens: int | None


def load_replay(path: Path) -> Battery:
    """The file's requests as a battery (``r0001``... by line), each validated."""
    raw = read_bounded(path, MAX_BYTES, what="replay file", error=UsageError, hint="split the file")
    prompts: list[Prompt] = []
    for number, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if len(prompts) >= MAX_REQUESTS:
            raise UsageError(
                f"the replay file has more than {MAX_REQUESTS:,} requests",
                where=where,
                hint="replay a sample: the bench runs each request once per level and run",
            )
        if len(line) > MAX_LINE_BYTES:
            raise UsageError(
                f"a line of {len(line):,} bytes (at most {MAX_LINE_BYTES:,})", where=where
            )
        data = parse_json(line, what="the line", where=where, error=UsageError, hint=HINT)
        request = _request(data, where)
        prompts.append(_prompt(request, f"r{number:04d}", path))
    if not prompts:
        raise UsageError("the replay file has no request", where=str(path), hint=HINT)
    return Battery(f"replay:{path.name}", 1, tuple(prompts))


def _request(data: Any, where: str) -> Replayed:
    if not isinstance(data, dict):
        raise UsageError("a line is not a JSON object", where=where, hint=HINT)
    # A LiteLLM spend-log row nests the client's body in proxy_server_request.
    body = data.get("proxy_server_request") if "messages" not in data else data
    if not isinstance(body, dict) or "messages" not in body:
        raise UsageError("the line has no messages", where=where, hint=HINT)
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise UsageError("messages is not a list of messages", where=where, hint=HINT)
    if len(messages) > MAX_MESSAGES:
        raise UsageError(
            f"{len(messages)} messages in one request (at most {MAX_MESSAGES})", where=where
        )
    found = tuple(_message(m, f"{where}: messages[{i}]") for i, m in enumerate(messages))
    if not any(role == "user" for role, _ in found):
        raise UsageError("the request has no user message", where=where, hint=HINT)
    params = data.get("model_parameters")
    sources = [body, params if isinstance(params, dict) else {}]
    max_tokens = None
    for source in sources:
        for key in ("max_tokens", "max_completion_tokens"):
            value = source.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{key} {value!r} is not a whole number >= 1", where=where)
            max_tokens = min(value, MAX_TOKENS)
            break
        if max_tokens is not None:
            break
    return Replayed(found, max_tokens)


def _message(message: Any, where: str) -> tuple[str, str]:
    if not isinstance(message, dict):
        raise UsageError("a message is not an object", where=where, hint=HINT)
    role = message.get("role")
    if role not in ROLES:
        raise UsageError(
            f"role {role!r} is not one of {', '.join(sorted(ROLES))}",
            where=where,
            hint="tool results and tool calls are not replayed; keep the text turns",
        )
    content = message.get("content")
    if isinstance(content, str):
        return str(role), content
    if isinstance(content, list):
        # Text parts only: an image or audio part would need its file, which a log
        # does not carry faithfully.
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise UsageError(
                    "a content part that is not text", where=where, hint="replay text turns"
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise UsageError("a text part without text", where=where)
            texts.append(text)
        return str(role), "\n".join(texts)
    if content is None and role == "assistant":
        return "assistant", ""  # an assistant turn that only called tools
    raise UsageError("content is not text", where=where, hint=HINT)


def _prompt(request: Replayed, ident: str, path: Path) -> Prompt:
    text = "\n\n".join(f"{role}: {content}" for role, content in request.messages)
    return Prompt(
        id=ident,
        kind="replay",
        task="",
        text=text,
        title=f"{path.name} {ident}",
        author="",
        source=str(path),
        licence="the operator's own traffic",
        messages=request.messages,
        max_tokens=request.max_tokens,
    )
