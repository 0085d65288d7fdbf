"""Secrets stay out of argv and out of a server's environment (L-06).

Real `inferfleet up` with the real llama-server: a secret-looking flag in
``extra_args`` is refused before anything starts; a started server's
``/proc/<pid>/environ`` holds PATH, HOME, LANG/LC_*, TZ, its own tunables and
its secrets_env values, never the caller's HF_TOKEN, cloud keys or a stray
LLAMA_ARG_*. `secrets scan` finds a short secret whose name says secret.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest
import yaml
from helpers import no_process_on

from inferfleet.backends.process import START_TOKEN
from inferfleet.backends.records import RecordStore

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _with(fleet: Path, **service: object) -> None:
    data = yaml.safe_load(fleet.read_text())
    data["services"]["gemma"].update(service)
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize(
    "extra_args",
    [
        ["--api-key", "hunter2"],
        ["--api-key=hunter2"],
        ["--hf-token", "x"],
        ["-hft", "x"],
        ["--alias-extra", "hf_" + "a" * 30],  # a token-shaped value, whatever its flag
    ],
)
def test_up_refuses_a_secret_on_the_command_line_and_starts_nothing(
    cli, local_fleet: Path, port: int, extra_args: list[str]
) -> None:
    _with(local_fleet, extra_args=extra_args)
    result = cli("up", str(local_fleet))
    assert result.code == 2, result.stdout + result.stderr
    text = result.stdout + result.stderr
    assert "on its command line (extra_args)" in text and "secrets_env" in text
    assert "hunter2" not in text and "a" * 30 not in text  # never echoed
    assert no_process_on(port)
    state = Path(os.environ["INFERFLEET_STATE_DIR"])
    assert RecordStore(state).read("gemma") is None


def test_a_started_server_gets_a_minimal_environment(
    cli, local_fleet: Path, port: int, servers_of: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = local_fleet.parent / "secrets.env"
    secrets.write_text("# for the server only\nSERVICE_SIDE_TOKEN='abc123'\n")
    secrets.chmod(0o600)
    _with(local_fleet, secrets_env=str(secrets), env={"MY_TUNABLE": "7"})
    monkeypatch.setenv("HF_TOKEN", "hf_" + "c" * 30)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "caller-only")
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "1")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("TZ", "UTC")
    result = cli("up", str(local_fleet), "--json", "--no-contract")
    assert result.code == 0, result.stderr
    pid = json.loads(result.stdout)["services"][0]["pid"]
    servers_of.append(pid)
    try:
        env = psutil.Process(pid).environ()
        assert "HF_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
        assert "LLAMA_ARG_CTX_SIZE" not in env
        assert env["SERVICE_SIDE_TOKEN"] == "abc123" and env["MY_TUNABLE"] == "7"
        assert env["PATH"] == os.environ["PATH"] and env["LC_ALL"] == "C.UTF-8"
        assert env["TZ"] == "UTC"
        # START_TOKEN: the random id of this start (a crash between spawn and record is
        # cleaned up by it, backends/process.py); no secret and no caller variable.
        allowed = {"PATH", "HOME", "LANG", "TZ", "SERVICE_SIDE_TOKEN", "MY_TUNABLE", START_TOKEN}
        assert {k for k in env if not k.startswith("LC_")} <= allowed | {"HOME"}, sorted(env)
        assert "hf_" + "c" * 30 not in " ".join(psutil.Process(pid).cmdline())
    finally:
        assert cli("down", "--file", str(local_fleet)).code == 0
    assert no_process_on(port)


def test_a_missing_secrets_env_file_is_a_clear_error(cli, local_fleet: Path, port: int) -> None:
    _with(local_fleet, secrets_env=str(local_fleet.parent / "nope.env"))
    result = cli("up", str(local_fleet), "--no-contract")
    assert result.code != 0
    assert "cannot read env file" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert no_process_on(port)


def test_secrets_scan_finds_a_short_secret_named_as_one(tmp_path: Path, cli) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.md").write_text("call it with key abc123 please\nlatest release abc1234\n")
    (repo / "config.yaml").write_text("debug: true\nmode: none\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    env = tmp_path / "secrets.env"
    env.write_text("API_KEY=abc123\nDEBUG=true\nDB_PASSWORD=none\nSHORT_TOKEN=ab\n")
    result = cli("secrets", "scan", "--repo", str(repo), "-e", str(env), "--json")
    assert result.code == 1, result.stdout
    doc = json.loads(result.stdout)
    assert doc["secret_values"] == 1  # API_KEY; placeholders and 2-char values are not secrets
    assert [(f["path"], f["line"], f["what"]) for f in doc["findings"]] == [
        ("notes.md", 1, "value of API_KEY from secrets.env")
    ]  # a whole word only: "abc1234" on line 2 is not it
    assert "abc123" not in result.stdout
