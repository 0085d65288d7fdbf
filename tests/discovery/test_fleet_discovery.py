"""Which fleet file a verb reads: $INFERFLEET_FILE > ./fleet.yaml >
the nearest parent's, stopping at the git repository's top; the embedded example only
for ``up`` and ``show`` (said on stderr), exit 2 with the fix for every other verb."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.cli import run_cli

from inferfleet.fleetfile.discover import default_fleet_path, discover


def _fleet(path: Path, host: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "hosts": {host: {"address": "localhost"}}}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/top/fleet.yaml (host: top) and tmp/top/a/b, the cwd; no INFERFLEET_FILE."""
    monkeypatch.delenv("INFERFLEET_FILE", raising=False)
    _fleet(tmp_path / "top" / "fleet.yaml", "top")
    work = tmp_path / "top" / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return tmp_path


def test_the_nearest_parent_fleet_file_is_used_and_named(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(monkeypatch, "validate")
    assert result.code == 0, result.stderr
    assert str(tree / "top" / "fleet.yaml") in result.stdout
    assert "from a parent directory" in result.stderr


def test_cwd_fleet_file_beats_the_parent(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fleet(Path.cwd() / "fleet.yaml", "here")
    found = discover()
    assert found == (Path("fleet.yaml"), "the current directory")
    result = run_cli(monkeypatch, "validate")
    assert result.code == 0 and "fleet.yaml" in result.stdout
    assert "parent" not in result.stderr


def test_inferfleet_file_beats_cwd_and_parent(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fleet(Path.cwd() / "fleet.yaml", "here")
    chosen = _fleet(tree / "elsewhere" / "prod.yaml", "envhost")
    monkeypatch.setenv("INFERFLEET_FILE", str(chosen))
    assert discover() == (chosen, "$INFERFLEET_FILE")
    assert default_fleet_path() == chosen
    result = run_cli(monkeypatch, "validate")
    assert result.code == 0 and str(chosen) in result.stdout


def test_inferfleet_file_naming_nothing_is_a_usage_error(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_FILE", str(tree / "missing.yaml"))
    result = run_cli(monkeypatch, "validate")
    assert result.code == 2
    assert "INFERFLEET_FILE" in result.stderr and "missing.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_walk_stops_at_the_git_repository_top(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "top" / "a" / ".git").mkdir()  # a repository inside top/: top's file is not ours
    assert discover() is None
    assert default_fleet_path() == Path("fleet.yaml")
    result = run_cli(monkeypatch, "validate")
    assert result.code == 2
    assert "no fleet file" in result.stderr and "inferfleet init" in result.stderr


def test_a_fleet_file_at_the_repository_top_is_found(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "top" / ".git").mkdir()
    assert discover() == (tree / "top" / "fleet.yaml", "a parent directory")


@pytest.mark.parametrize("verb", [("check",), ("budget",), ("models", "verify", "m")])
def test_other_verbs_without_a_fleet_file_exit_2_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verb: tuple[str, ...]
) -> None:
    monkeypatch.delenv("INFERFLEET_FILE", raising=False)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    result = run_cli(monkeypatch, *verb)
    assert result.code == 2, (result.stdout, result.stderr)
    assert "no fleet file" in result.stderr
    assert "--file" in result.stderr and "INFERFLEET_FILE" in result.stderr
    assert "embedded example" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git"]  # nothing written


def test_show_without_a_fleet_file_uses_the_example_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INFERFLEET_FILE", raising=False)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    result = run_cli(monkeypatch, "show")
    assert result.code == 0, result.stderr
    assert "using the embedded example fleet" in result.stderr
    assert "using the embedded example" not in result.stdout
    document = run_cli(monkeypatch, "show", "--json").document()
    assert document["file"].endswith("examples/local/fleet.yaml")


def test_plan_from_a_subdirectory_of_the_checkout_reads_the_repository_fleet_file(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """plan/deploy work from anywhere in the current checkout (discovery, not ./fleet.yaml)."""
    assert default_fleet_path() == tree / "top" / "fleet.yaml"
    (tree / "top" / "a" / ".git").mkdir()
    result = run_cli(monkeypatch, "plan")
    assert result.code == 2
    assert "fleet file not found" in result.stderr and "inferfleet init" in result.stderr
