"""CLI conventions users know from other tools: ``-h``, shell completion, ``init`` makes a repo.

Completion is proven in a real bash: the script ``inferfleet completion bash`` prints is
sourced, its completion function is called the way bash calls it, and the words it offers
come from the real ``inferfleet`` entry point of this venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import CliResult

from inferfleet.cli.app import VERBS

Cli = Callable[..., CliResult]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "args",
    [("-h",), ("status", "-h"), ("runtime", "-h"), ("runtime", "install", "-h"), ("check", "-h")],
)
def test_dash_h_is_help_everywhere(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.code == 0, result.stderr
    assert "Usage:" in result.stdout
    # rich's help table: the long name, then the short one, on the help option's row
    [row] = [line for line in result.stdout.splitlines() if "Show this message" in line]
    assert row.split()[1:3] == ["--help", "-h"], row


def test_completion_is_a_listed_verb(cli: Cli) -> None:
    assert "completion" in VERBS
    assert "completion" in cli("--help").stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_call_back_into_inferfleet(cli: Cli, shell: str) -> None:
    result = cli("completion", shell)
    assert result.code == 0, result.stderr
    assert "_INFERFLEET_COMPLETE=complete_" + shell in result.stdout
    assert "inferfleet" in result.stdout


def test_an_unknown_shell_is_a_usage_error(cli: Cli) -> None:
    result = cli("completion", "tcsh")
    assert result.code == 2
    assert "tcsh" in result.stderr and "bash" in result.stderr


def _complete_in_bash(words: str, tmp_path: Path) -> list[str]:
    script = tmp_path / "complete.bash"
    done = subprocess.run(
        [str(BIN / "inferfleet"), "completion", "bash"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    script.write_text(done.stdout)
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    probe = (
        f"source {script}; COMP_WORDS=({words}); COMP_CWORD={cword}; "
        '_inferfleet_completion inferfleet; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    shell = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, timeout=60, env=env
    )
    assert shell.returncode == 0, shell.stderr
    return [line for line in shell.stdout.splitlines() if line]


def test_real_bash_completes_verbs_and_options(tmp_path: Path) -> None:
    offered = _complete_in_bash("inferfleet sta", tmp_path)
    assert any(word.startswith("status") for word in offered), offered
    offered = _complete_in_bash("inferfleet check --st", tmp_path)
    assert any(word.startswith("--strict") for word in offered), offered


def test_init_makes_a_git_repository(cli: Cli, tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    result = cli("init", str(repo))
    assert result.code == 0, result.stderr
    assert (repo / ".git").is_dir()
    assert "initialised a git repository" in result.stdout + result.stderr
    top = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    assert Path(top.stdout.strip()) == repo.resolve()


def test_init_inside_a_repository_makes_no_nested_one(cli: Cli, tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    result = cli("init", str(tmp_path / "infra" / "fleet"))
    assert result.code == 0, result.stderr
    assert not (tmp_path / "infra" / "fleet" / ".git").exists()
    assert "initialised" not in result.stdout + result.stderr


def _commands() -> dict[str, Any]:
    """Every leaf command of the real app, by its full name (``runtime install``)."""
    import typer

    from inferfleet.cli.app import build_app

    found: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(build_app(full=True)), [])
    return found


# Verbs that read no fleet file: what they work on is named otherwise (a model file, a
# Hub repo, a shell, a lesson, the git repository, the relay's own settings).
NO_FLEET_FILE = {
    "schema", "init", "completion", "explain", "gguf inspect", "models manifest",
    "secrets scan", "relay serve", "relay config",
}  # fmt: skip


def test_every_verb_that_reads_a_fleet_file_takes_dash_f() -> None:
    missing = []
    for name, command in _commands().items():
        opts = {o for p in command.params if p.param_type_name == "option" for o in p.opts}
        if name not in NO_FLEET_FILE and not {"-f", "--file"} <= opts:
            missing.append(name)
    assert missing == []


def test_a_short_flag_has_one_meaning_across_verbs() -> None:
    """``-n`` was lines in ``logs`` and runs in ``bench``; ``-r`` a revision and a folder."""
    longs: dict[str, list[set[str]]] = {}
    for command in _commands().values():
        for param in command.params:
            if param.param_type_name != "option":
                continue
            names = [*param.opts, *param.secondary_opts]
            long = {n for n in names if n.startswith("--")}
            for short in (n for n in names if len(n) == 2 and n != "-h"):
                longs.setdefault(short, []).append(long)
    for short, sets in longs.items():
        assert set.intersection(*sets), f"{short} means {sorted(map(sorted, sets))}"


@pytest.mark.parametrize("verb", ["validate", "check"])
def test_the_fleet_file_positional_and_dash_f_are_one_file(
    cli: Cli, verb: str, tmp_path: Path
) -> None:
    from inferfleet.cli.fleet_cmds import embedded_example

    example = str(embedded_example())
    assert cli(verb, "-f", example).code == 0
    other = tmp_path / "fleet.yaml"
    other.write_text(Path(example).read_text())
    both = cli(verb, example, "-f", str(other))
    assert both.code == 2 and "two fleet files" in both.stderr and "Traceback" not in both.stderr
