"""L-55: no secret value in the committed repository or in rendered files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.git import git

TOKEN = "hf_" + "Q" * 12 + "abcdefghij1234"  # token-shaped, built so this file holds none


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "fleet"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("*.env\n")
    (repo / "fleet.yaml").write_text("version: 1\nhosts: {}\n")
    (repo / "secrets.env").write_text(
        f"# untracked\nHF_TOKEN={TOKEN}\nexport DB_PASSWORD='correct horse battery'\nPORT=8080\n"
    )
    git(repo, "add", "-A")
    return repo


def test_clean_repo_passes(cli, repo: Path) -> None:
    result = cli("secrets", "scan", "--repo", str(repo), "-e", str(repo / "secrets.env"))
    assert result.code == 0, result.stdout + result.stderr
    assert "clean" in result.stdout and "2 secret value(s)" in result.stdout


def test_leaked_value_in_a_tracked_file_is_found_with_its_line(cli, repo: Path) -> None:
    (repo / "notes.md").write_text("setup\n\nthe db password is correct horse battery\n")
    git(repo, "add", "notes.md")
    result = cli("secrets", "scan", "--repo", str(repo), "-e", str(repo / "secrets.env"), "--json")
    assert result.code == 1
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.secrets-scan/v1"
    [finding] = doc["findings"]
    assert finding["path"] == "notes.md" and finding["line"] == 3
    assert finding["what"] == "value of DB_PASSWORD from secrets.env"
    assert "horse" not in result.stdout  # the secret itself is never printed


def test_token_in_rendered_output_is_found(cli, repo: Path, tmp_path: Path) -> None:
    rendered = tmp_path / "out"
    (rendered / "hosts").mkdir(parents=True)
    (rendered / "hosts" / "chat.env").write_text(f"MODEL=x\nKEY={TOKEN}\n")
    result = cli("secrets", "scan", "--repo", str(repo), "--rendered", str(rendered))
    assert result.code == 1
    assert "token-shaped string" in result.stdout and "chat.env:2" in result.stdout
    assert TOKEN not in result.stdout


def test_untracked_files_are_not_the_repo(cli, repo: Path) -> None:
    # The env file itself holds the token but is untracked: not a leak.
    (repo / "scratch.txt").write_text(TOKEN)  # untracked too
    result = cli("secrets", "scan", "--repo", str(repo), "-e", str(repo / "secrets.env"))
    assert result.code == 0


def test_rendered_example_fleet_is_clean(cli, repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "render"
    from inferfleet.cli.fleet_cmds import embedded_example

    rendered = cli("render", "--file", str(embedded_example()), "--out", str(out))
    assert rendered.code == 0, rendered.stderr
    result = cli(
        "secrets",
        "scan",
        "--repo",
        str(repo),
        "-e",
        str(repo / "secrets.env"),
        "--rendered",
        str(out),
    )
    assert result.code == 0, result.stdout


def test_missing_env_file_and_non_repo_are_clear_errors(cli, tmp_path: Path, repo: Path) -> None:
    missing = cli("secrets", "scan", "--repo", str(repo), "-e", str(tmp_path / "nope.env"))
    assert missing.code == 2 and "cannot read env file" in missing.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    not_repo = cli("secrets", "scan", "--repo", str(plain))
    assert not_repo.code == 2 and "is not a git repository" in not_repo.stderr
