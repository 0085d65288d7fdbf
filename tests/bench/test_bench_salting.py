"""L-47: every prompt ``inferfleet bench`` sends carries its own salt as the prefix.

A warm prefix-cache hit hides exactly the prefill a benchmark means to
compare. The real ``bench`` runs against a loopback stand-in that streams
OpenAI-style answers and keeps a prefix cache the way servers do: it counts,
per request, how many leading words of the prompt an earlier request already
sent, and reports them as cached tokens. Every request the bench sent (warm-up
included) is captured and must start with a salt no other request used; the
bench's own report must show no cached tokens. Without salting, the battery's
prompts repeat across levels and runs and both assertions fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers.asgi_server import openai_app, serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from inferfleet.bench.battery import load_battery

MODEL = "standin"
# The salt: the very first characters of the text, then one space.
SALTED = re.compile(r"(?P<salt>[0-9a-f]{16}) (?P<rest>.*)", re.DOTALL)


class PrefixCacheServer:
    """A chat/completions endpoint that records every prompt and reports prefix-cache hits."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.cached: list[int] = []

    def text_of(self, body: dict[str, Any]) -> str:
        if "messages" in body:
            return str(body["messages"][-1]["content"])
        return str(body["prompt"])

    def cache_hit(self, words: list[str]) -> int:
        """Leading words an earlier prompt already had: what a prefix cache would reuse."""
        best = 0
        for earlier in self.prompts:
            old = earlier.split()
            n = 0
            while n < min(len(old), len(words)) and old[n] == words[n]:
                n += 1
            best = max(best, n)
        return best

    async def complete(self, request: Request) -> Response:
        body = json.loads(await request.body())
        text = self.text_of(body)
        words = text.split()
        cached = self.cache_hit(words)
        self.prompts.append(text)
        self.cached.append(cached)
        chat = "messages" in body
        n = int(body["max_tokens"])

        async def events() -> AsyncIterator[bytes]:
            for i in range(n):
                piece = {"delta": {"content": f"w{i} "}} if chat else {"text": f"w{i} "}
                chunk = {"model": MODEL, "choices": [{"index": 0, **piece}]}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            usage = {
                "prompt_tokens": len(words),
                "completion_tokens": n,
                "total_tokens": len(words) + n,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            final = {"model": MODEL, "choices": [], "usage": usage}
            yield f"data: {json.dumps(final)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    def app(self) -> Starlette:
        return openai_app(self.complete, MODEL)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_L47_every_prompt_the_bench_sends_starts_with_its_own_salt(
    cli: Any, tmp_path: Path, api: str
) -> None:
    server = PrefixCacheServer()
    battery = {f"{p.task}\n\n{p.text}" for p in load_battery().prompts}
    with serving(server.app()) as url:
        result = cli(
            "bench",
            url,
            "--api",
            api,
            "--concurrency",
            "1,2",
            "--runs",
            "2",
            "--prompts",
            "2",
            "--max-tokens",
            "128",
            "--out",
            str(tmp_path / "results"),
            "--json",
        )
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)

    # 1 warm-up, then 2 runs x (2 prompts at concurrency 1 + 2 at concurrency 2).
    assert len(server.prompts) == 1 + 2 * (2 + 2)
    salts = []
    for text in server.prompts:
        salted = SALTED.fullmatch(text)
        assert salted is not None, f"a prompt went out without a salt prefix: {text[:60]!r}"
        assert salted["rest"] in battery  # the salt, then the battery prompt as it is
        salts.append(salted["salt"])
    assert len(set(salts)) == len(salts), "two requests shared a salt"
    # So no request reused another's prefix, and the bench's own figures show it.
    assert server.cached == [0] * len(server.prompts)
    levels = doc["levels"]
    assert levels and all(lv["cache"]["reported"] for lv in levels)
    assert all(lv["cache"]["max_cached_tokens"] == 0 for lv in levels)
