"""The README's "your own GPU box" quick start, run as written, on this machine.

The blocks are read from README.md itself (the ``yaml`` block and the ``sh`` blocks of that
section), so the README cannot drift from what works. What a CPU test machine cannot have
is substituted, and only that: the user's own llama-server is this machine's pinned build
(copied, so the pin is of a file the test owns), the user's GGUF is the small test model
(under the name the README uses; a base model, so ``client.chat: false``), the NVIDIA card
is a CPU device, the port a free one.
``runtime pin``'s YAML replaces the runtime the way the README tells the user to.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from helpers import ROOT, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SECTION = "## Your own GPU box"
BIN = Path(sys.executable).parent


def readme_blocks() -> tuple[list[str], str, list[str]]:
    """(init commands, the fleet file, the commands in order) of the quick start."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    shells = [body for lang, body in blocks if lang == "sh"]
    [fleet] = [body for lang, body in blocks if lang == "yaml"]
    assert len(shells) == 2, "the quick start has an init block and a command block"

    def commands(body: str) -> list[str]:
        return [line.split("  #")[0].strip() for line in body.splitlines() if line.strip()]

    return commands(shells[0]), fleet, commands(shells[1])


def run(line: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("INFERFLEET_FILE", None)
    argv = [os.path.expanduser(a).replace(str(Path.home()), str(home)) for a in shlex.split(line)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_quick_start_runs_as_written(
    tmp_path: Path, gemma_file: Path, llama_server_binary: Path
) -> None:
    init, fleet_text, steps = readme_blocks()
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    binary = tmp_path / "opt" / "llama-server"
    binary.parent.mkdir()
    shutil.copy2(llama_server_binary, binary)
    fleet = yaml.safe_load(fleet_text)
    [model_file] = re.findall(r"--include '([^']+)'", " ".join(steps))
    os.link(gemma_file, home / "models" / model_file)  # the user's GGUF, by the README's name

    # `inferfleet init ~/fleet && cd ~/fleet`
    [line] = init
    first, _cd = line.split("&&")
    done = run(first, tmp_path, home)
    assert done.returncode == 0, done.stderr
    repo = home / "fleet"
    assert (repo / ".git").is_dir() and (repo / "fleet.yaml").is_file()

    port = free_port()
    fleet["runtimes"]["mine"]["binary"] = str(binary)
    fleet["hosts"]["box"]["devices"] = [{"name": "gpu0", "vendor": "cpu", "memory": "4GiB"}]
    fleet["services"]["chat"]["port"] = port
    # The test model is a base model without a chat template (L-19), as the embedded
    # example declares; the README's Qwen has one.
    fleet["services"]["chat"]["client"] = {"chat": False}
    (repo / "fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))

    started = False
    try:
        for step in steps:
            done = run(step, repo, home)
            assert done.returncode == 0, f"{step}\n{done.stdout}\n{done.stderr}"
            if step.startswith("inferfleet runtime pin"):
                pinned = yaml.safe_load(done.stdout)["runtimes"]["mine"]
                assert set(pinned) >= {"version", "sha256", "binary"}, done.stdout
                fleet["runtimes"]["mine"] = pinned  # "replace runtimes.mine with it"
                (repo / "fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False))
            if step.startswith("inferfleet models manifest"):
                assert model_file in (repo / "qwen.manifest").read_text()
            if step == "inferfleet up":
                started = True
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/v1/completions",
                    json={"prompt": "The capital of France is", "max_tokens": 4},
                    timeout=60,
                )
                assert answer.status_code == 200, answer.text
            if step == "inferfleet down":
                started = False
    finally:
        if started:
            run("inferfleet down", repo, home)
