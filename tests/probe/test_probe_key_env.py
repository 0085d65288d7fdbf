"""`probe URL --key-env VAR` and `bench URL --key-env VAR`: a server that requires an API key
(L-58) is measured with the key from the environment, never from the command line (L-06).

The real llama-server (b11434, the test model) reads its key from LLAMA_API_KEY and then
answers 401 to every route but /health without it: without ``--key-env`` the probe's
checks fail, with it they pass and the bench's requests succeed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEY = "sk-test-0123456789abcdef0123456789abcdef"
Cli = Callable[..., Any]


def test_a_server_that_requires_a_key_is_probed_and_benched_with_key_env(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server reads LLAMA_API_KEY at start, as from a secrets_env.
    with running_server(tmp_path / "server", secrets={"LLAMA_API_KEY": KEY}) as server:
        monkeypatch.setenv("FLEET_KEY", KEY)

        without = cli("probe", server.url, "--json")
        assert without.code == 1, without.stderr
        assert "401" in without.stdout

        probed = cli("probe", server.url, "--key-env", "FLEET_KEY", "--json")
        assert probed.code == 0, probed.stdout
        assert KEY not in probed.stdout + probed.stderr  # the key is sent, never shown

        benched = cli(
            "bench", server.url, "--key-env", "FLEET_KEY", "--api", "completions",
            "-c", "1", "--runs", "1", "--prompts", "1", "--out", str(tmp_path / "b"), "--json",
        )  # fmt: skip
        assert benched.code == 0, benched.stderr
        assert json.loads(benched.stdout)["levels"][0]["ok"] == 1


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("1BAD", "is not an environment variable name"),
        ("NOT_SET_HERE", "the environment has no usable key in NOT_SET_HERE"),
    ],
)
def test_a_bad_key_env_is_a_usage_error_before_anything_is_sent(
    cli: Cli, name: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    for verb in ("probe", "bench"):
        result = cli(verb, "http://127.0.0.1:9", "--key-env", name)
        assert result.code == 2, (verb, result.stderr)
        assert said in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
