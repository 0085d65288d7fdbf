"""The README's first commands, in the README's order, on a fresh copy of the repository.

`up` (no fleet file: the embedded example), then the block the README shows
after it (`status`, the `curl` of a completion, `down`), each run as the
README writes it, from the copy's top folder, read out of README.md itself
so the test follows the text. Every command must exit 0 in sequence: the
follow-up verbs find the fleet `up` ran (deploy/last_up.py).

`.venv/bin/inferfleet` in the copy is this interpreter running the copy's
own source (the pip install the README starts with is not repeated: the
dependencies are this environment's). The embedded example serves on
127.0.0.1:8080, so the sequence runs in a network namespace of its own:
its loopback is private, port 8080 there is free whatever runs here, and
the curl reaches the server `up` started and nothing else. The real
llama-server (the shared cache's build) on the real model.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers import ROOT as REPO_ROOT
from helpers.git import git

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]


def readme_sequence(readme: str) -> list[str]:
    """`up` from the install line, then every command of the block that follows it."""
    install = re.search(r"```sh\n(python3 -m venv .*?)\n```", readme)
    assert install is not None, "the README's install line moved"
    up = install.group(1).split("&&")[-1].strip()
    assert up == ".venv/bin/inferfleet up", up
    after = readme[install.end() :]
    block = re.search(r"```sh\n(.*?)\n```", after, re.S)
    assert block is not None
    commands: list[str] = []
    pending = ""
    for line in block.group(1).splitlines():
        text = line.split("  #")[0].rstrip()  # the README's trailing comments
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        commands.append(pending + text)
        pending = ""
    return [up, *commands]


def fresh_copy(folder: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others",
         "--exclude-standard", "--", "src", "README.md", "pyproject.toml"],
        capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    git(folder, "init", "-q", "-b", "main")
    launcher = folder / ".venv" / "bin" / "inferfleet"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(
        f'#!/bin/sh\nPYTHONPATH={folder / "src"} exec {sys.executable} -m inferfleet "$@"\n'
    )
    launcher.chmod(0o755)
    return folder


def test_the_readme_sequence_works_in_order_on_a_fresh_copy(tmp_path: Path) -> None:
    commands = readme_sequence((REPO_ROOT / "README.md").read_text())
    assert [c.split()[:2] for c in commands] == [
        [".venv/bin/inferfleet", "up"],
        [".venv/bin/inferfleet", "status"],
        ["curl", "-s"],
        [".venv/bin/inferfleet", "down"],
    ]
    copy = fresh_copy(tmp_path / "inferfleet")
    netns = f"ifreadme-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    env = {k: v for k, v in os.environ.items() if k not in {"INFERFLEET_FILE", "PYTHONPATH"}}
    try:
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
        outputs = []
        for command in commands:
            done = subprocess.run(
                ["ip", "netns", "exec", netns, "sh", "-c", command],
                cwd=copy, env=env, capture_output=True, text=True, timeout=900,
            )  # fmt: skip
            outputs.append(done)
            assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
        up, status, curl, down = outputs
        assert "using the embedded example fleet" in up.stderr
        # The follow-up verbs say which fleet they use: the one up ran.
        for verb in (status, down):
            assert "`inferfleet up` last ran on this machine" in verb.stderr
        assert "gemma" in status.stdout and "healthy" in status.stdout, status.stdout
        answer = json.loads(curl.stdout)
        assert answer["choices"][0]["text"].strip(), answer
        assert re.search(r"gemma: (terminated|killed) \(pid \d+\)", down.stdout), down.stdout
    finally:
        found = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        for pid in found.stdout.split():  # whatever the sequence left (a failed down)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", netns], check=False)
