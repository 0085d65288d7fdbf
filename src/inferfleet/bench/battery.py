"""The prompt battery shipped with the package, and per-request salting.

Real prose and real code of varied lengths (L-48), with their sources and
licences in ``battery/battery.json``. Every request gets a fresh salt at the
very start of its text, so no two requests share a prefix past the chat
template's own tokens and no prefix cache can hide the prefill (L-47); the
server's cached-token count is recorded per request to prove it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from inferfleet.client.stream import new_salt as new_salt
from inferfleet.errors import UsageError


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str  # "prose" | "code"
    task: str
    text: str
    title: str
    author: str
    source: str
    licence: str
    # A replayed request (bench/replay.py): its own conversation and answer length.
    messages: tuple[tuple[str, str], ...] | None = None
    max_tokens: int | None = None

    def salted(self, salt: str) -> str:
        """The request text: salt first, so the very first tokens differ (L-47)."""
        if not self.task:
            return f"{salt} {self.text}"
        return f"{salt} {self.task}\n\n{self.text}"

    def chat_messages(self, salt: str) -> list[dict[str, str]]:
        """The chat request's messages, salted at the very start of the first (L-47)."""
        if self.messages is None:
            return [{"role": "user", "content": self.salted(salt)}]
        turns = [{"role": role, "content": text} for role, text in self.messages]
        turns[0]["content"] = f"{salt} {turns[0]['content']}"
        return turns


@dataclass(frozen=True)
class Battery:
    name: str
    version: int
    prompts: tuple[Prompt, ...]

    def select(self, ids: list[str] | None = None, limit: int | None = None) -> list[Prompt]:
        """Prompts by id (in the order given) or the first ``limit`` of the battery."""
        chosen = list(self.prompts)
        if ids:
            by_id = {p.id: p for p in self.prompts}
            unknown = [i for i in ids if i not in by_id]
            if unknown:
                raise UsageError(
                    f"unknown prompt id(s): {', '.join(unknown)}",
                    hint=f"the battery has: {', '.join(by_id)}",
                )
            chosen = [by_id[i] for i in ids]
        if limit is not None:
            if limit < 1:
                raise UsageError("--prompts must be at least 1", hint="e.g. --prompts 4")
            chosen = chosen[:limit]
        return chosen


def load_battery() -> Battery:
    folder = resources.files("inferfleet.bench").joinpath("battery")
    index: dict[str, Any] = json.loads(folder.joinpath("battery.json").read_text("utf-8"))
    prompts = []
    for entry in index["prompts"]:
        text = folder.joinpath(entry["file"]).read_text("utf-8").strip("\n")
        prompts.append(
            Prompt(
                id=entry["id"],
                kind=entry["kind"],
                task=entry["task"],
                text=text,
                title=entry["title"],
                author=entry["author"],
                source=entry["source"],
                licence=entry["licence"],
            )
        )
    return Battery(index["battery"], int(index["version"]), tuple(prompts))
