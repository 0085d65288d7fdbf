"""`inferfleet runtime adopt PATH`: a binary the operator already has, pinned in the fleet file.

The real pinned llama-server (built once per machine) is adopted into a fleet
file with comments: the runtime block is added with its version and sha256
(L-42), the one service switched to it keeps every other line and comment,
and `up` then serves the model through it. Bad input is refused with the
reason and the file is left byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers import free_port
from helpers.real_server import SERVICE, fleet_data, state_dir

from inferfleet.fleetfile.loader import load_fleet

pytestmark = [pytest.mark.slow]

Cli = Callable[..., Any]
HEADER = "# Our one box. Every setting has its reason (L-25).\n"


def commented_fleet(path: Path, port: int) -> Path:
    """The example fleet on ``port`` with a header comment and one after the runtime line."""
    text = yaml.safe_dump(fleet_data(port), sort_keys=False)
    text = text.replace(
        "    runtime: llama-cpp\n", "    runtime: llama-cpp  # the pinned build\n", 1
    )
    path.write_text(HEADER + text)
    return path


def test_an_adopted_server_is_pinned_and_up_serves_through_it(
    cli: Cli, tmp_path: Path, llama_server_binary: Path, gemma_file: Path
) -> None:
    port = free_port()
    fleet = commented_fleet(tmp_path / "fleet.yaml", port)
    before = fleet.read_text()
    done = cli("runtime", "adopt", str(llama_server_binary), "--use-for", SERVICE, "-f", str(fleet))
    assert done.code == 0, done.stderr
    after = fleet.read_text()

    # Only the new block and the one key changed; comments kept.
    assert after.startswith(HEADER)
    [line] = [ln for ln in after.splitlines() if ln.startswith("    runtime:")]
    assert line.split("#")[0].split() == ["runtime:", "llama-cpp-11434"]
    assert "# the pinned build; adopted from " in line
    removed = [ln for ln in before.splitlines() if ln not in after.splitlines()]
    assert removed == ["    runtime: llama-cpp  # the pinned build"]
    loaded = load_fleet(fleet)
    runtime = loaded.fleet.runtimes["llama-cpp-11434"]
    digest = hashlib.sha256(llama_server_binary.resolve().read_bytes()).hexdigest()
    assert runtime.binary == str(llama_server_binary.absolute())
    assert runtime.sha256 == digest and runtime.version is not None
    assert "11434" in runtime.version
    assert loaded.fleet.runtimes["llama-cpp"].source is not None  # the old one stays

    with state_dir(tmp_path / "state"):
        try:
            up = cli("up", "-f", str(fleet))
            assert up.code == 0, up.stderr
            models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
            assert models["data"][0]["id"] == "gemma3-270m"
            status = cli("runtime", "list", "-f", str(fleet), "--json")
            assert status.code == 0, status.stderr
        finally:
            down = cli("down", "-f", str(fleet))
        assert down.code == 0, down.stderr


def test_a_second_adoption_gets_a_free_name_and_a_dry_run_writes_nothing(
    cli: Cli, tmp_path: Path, llama_server_binary: Path
) -> None:
    fleet = commented_fleet(tmp_path / "fleet.yaml", free_port())
    first = cli("runtime", "adopt", str(llama_server_binary), "-f", str(fleet))
    assert first.code == 0, first.stderr
    written = fleet.read_text()
    dry = cli("runtime", "adopt", str(llama_server_binary), "-f", str(fleet), "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "+  llama-cpp-11434-2:" in dry.stdout and fleet.read_text() == written
    assert set(load_fleet(fleet).fleet.runtimes) == {"llama-cpp", "llama-cpp-11434"}


def fake_program(folder: Path, name: str, body: str, *, executable: bool = True) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("not-executable", "is not an executable file"),
        ("no-version", "reported no llama.cpp version"),
        ("unknown-program", "which kind?"),
        ("bad-kind", "is not a runtime kind"),
        ("unknown-service", "--use-for 'nope': no such service"),
        ("taken-name", "runtimes.llama-cpp is already in the fleet file"),
    ],
)
def test_bad_input_is_refused_and_the_fleet_file_is_untouched(
    cli: Cli, tmp_path: Path, case: str, said: str
) -> None:
    fleet = commented_fleet(tmp_path / "fleet.yaml", free_port())
    before = fleet.read_bytes()
    program = fake_program(tmp_path, "llama-server", "echo 'version: 11434 (0123abc)'")
    args = [str(program)]
    if case == "not-executable":
        args = [str(fake_program(tmp_path, "other", "true", executable=False)), "--kind", "vllm"]
    elif case == "no-version":
        args = [str(fake_program(tmp_path / "..", "llama-server", "echo hello"))]
    elif case == "unknown-program":
        args = [str(fake_program(tmp_path, "my-server", "true"))]
    elif case == "bad-kind":
        args += ["--kind", "ollama"]
    elif case == "unknown-service":
        args += ["--use-for", "nope"]
    elif case == "taken-name":
        args += ["--name", "llama-cpp"]
    result = cli("runtime", "adopt", *args, "-f", str(fleet))
    assert result.code == 2, (result.stdout, result.stderr)
    assert said in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
    assert fleet.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["fleet.yaml", "llama-server", *(["other"] if case == "not-executable" else []),
         *(["my-server"] if case == "unknown-program" else [])]
    )  # fmt: skip
