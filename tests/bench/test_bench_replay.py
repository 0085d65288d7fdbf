"""`bench --replay`: real traffic (a JSONL of chat requests) instead of the battery.

The file is hostile input: every line validated with its line number in the
error, nothing measured when one line is bad. Against the real llama-server,
the replayed conversations reach the server as conversations (a system turn
costs prompt tokens), each request keeps its own answer length up to
--max-tokens, is salted (never a cache hit, L-47), and the model ends where it
would (no ignore_eos: real traffic, L-48).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import Running

from inferfleet.bench.replay import load_replay
from inferfleet.client.stream import request_body
from inferfleet.errors import UsageError

LONG_SYSTEM = " ".join(["You are a careful assistant who answers in plain English."] * 30)
OPENAI = {
    "model": "whatever-the-client-asked",
    "messages": [
        {"role": "system", "content": LONG_SYSTEM},
        {"role": "user", "content": "Name three rivers of Europe."},
    ],
    "max_tokens": 400,
    "temperature": 0.2,
}
LITELLM_PAYLOAD = {  # LiteLLM's standard logging payload (its logging callbacks)
    "id": "chatcmpl-1",
    "call_type": "acompletion",
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Count to five."}]}],
    "model_parameters": {"max_tokens": 24, "stream": True},
    "response": {"choices": []},
}
SPEND_LOG_ROW = {  # a spend-log row: the client's body nested
    "request_id": "x",
    "proxy_server_request": {
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": None},
            {"role": "user", "content": "Write a haiku about rain."},
        ],
        "max_completion_tokens": 64,
    },
}


def jsonl(path: Path, *lines: object) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_the_three_shapes_of_a_logged_request(tmp_path: Path) -> None:
    battery = load_replay(jsonl(tmp_path / "t.jsonl", OPENAI, "", LITELLM_PAYLOAD, SPEND_LOG_ROW))
    assert battery.name == "replay:t.jsonl"
    first, second, third = battery.prompts
    assert [p.id for p in battery.prompts] == ["r0001", "r0003", "r0004"]  # by line
    assert first.messages == (("system", LONG_SYSTEM), ("user", "Name three rivers of Europe."))
    assert (first.max_tokens, second.max_tokens, third.max_tokens) == (400, 24, 64)
    assert second.messages == (("user", "Count to five."),)
    assert third.messages is not None and third.messages[1] == ("assistant", "")
    # Salted at the very start of the first turn (L-47); nothing else of the line is sent.
    turns = first.chat_messages("SALT")
    assert turns[0] == {"role": "system", "content": f"SALT {LONG_SYSTEM}"}
    assert turns[1] == {"role": "user", "content": "Name three rivers of Europe."}
    body = request_body("chat", model="m", text="ignored", max_tokens=128, messages=turns)
    assert body["messages"] == turns and "temperature" not in body
    # A completions endpoint gets the conversation as text, salted first.
    assert second.salted("SALT") == "SALT user: Count to five."


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{not json", "the line is not JSON"),
        ("[1, 2]", "not a JSON object"),
        ({"prompt": "hi"}, "has no messages"),
        ({"messages": []}, "not a list of messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "role 'tool'"),
        ({"messages": [{"role": "system", "content": "only a system turn"}]}, "no user message"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "not text",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": True}, "max_tokens True"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens 0"),
        ("[" * 200 + "]" * 200, "nests"),
    ],
)
def test_a_bad_line_is_refused_with_its_line_number(
    tmp_path: Path, line: object, said: str
) -> None:
    path = jsonl(tmp_path / "t.jsonl", OPENAI, line)
    with pytest.raises(UsageError) as caught:
        load_replay(path)
    text = caught.value.render()
    assert said in text and f"{path}:2" in text, text


def test_an_empty_or_oversized_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no request"):
        load_replay(jsonl(tmp_path / "empty.jsonl", ""))
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate((64 << 20) + 1)
    with pytest.raises(UsageError, match="at most"):
        load_replay(big)


def test_the_cli_refuses_a_bad_file_before_measuring(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    path = jsonl(tmp_path / "t.jsonl", {"messages": "hi"})
    out = tmp_path / "out"
    result = cli("bench", "http://127.0.0.1:9", "--replay", str(path), "--out", str(out))
    assert result.code == 2, result.stderr
    assert "not a list of messages" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()  # nothing written


@pytest.mark.e2e
@pytest.mark.slow
def test_replayed_traffic_against_the_real_server(
    cli: Callable[..., Any], server: Running, tmp_path: Path
) -> None:
    short = {"messages": [{"role": "user", "content": "Name three rivers of Europe."}]}
    path = jsonl(tmp_path / "traffic.jsonl", OPENAI, LITELLM_PAYLOAD, SPEND_LOG_ROW, short)
    out = tmp_path / "results"
    result = cli(
        "bench", "gemma", "--file", str(server.fleet), "--replay", str(path),
        "--concurrency", "1", "--runs", "1", "--max-tokens", "128", "--out", str(out), "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["battery"]["name"] == "replay:traffic.jsonl"
    assert [p["id"] for p in doc["battery"]["prompts"]] == ["r0001", "r0002", "r0003", "r0004"]
    assert doc["options"]["ignore_eos"] is False  # real traffic ends where the model ends it
    records = {
        r["prompt_id"]: r
        for r in map(json.loads, (out / "requests.jsonl").read_text().splitlines())
    }
    assert set(records) == {"r0001", "r0002", "r0003", "r0004"}
    for rec in records.values():
        assert rec["ok"], rec["error"]
        assert rec["cached_tokens"] == 0  # salted: never a cache hit (L-47)
    # Each keeps its own answer length, capped by --max-tokens.
    assert records["r0001"]["completion_tokens"] <= 128
    assert records["r0002"]["completion_tokens"] <= 24
    assert records["r0003"]["completion_tokens"] <= 64
    # The conversation reached the server as sent: the system turn is paid in prompt tokens.
    assert records["r0001"]["prompt_tokens"] > records["r0004"]["prompt_tokens"] + 200
    assert len({r["salt"] for r in records.values()}) == 4
