"""What ``host bootstrap`` refuses, on real test hosts over real ssh: each refusal names the
host, what is wrong and the fix, and leaves the host as it was (no venv, no checkout made,
local changes untouched)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bootstrap_fleet import Cli, bare_fleet, bootstrap
from deploy_hosts import Lab
from helpers.git import git

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]


@pytest.fixture
def bare(lab: Lab, deploy_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND")
    return bare_fleet(lab, tmp_path / "fleet", {})


def untouched(repo: Any, host: str = "h1") -> bool:
    base = repo.folder / "hosts" / host
    return not (base / "venv").exists() and not (base / "fleet").exists()


def test_a_python_too_old_is_refused_with_the_fix(
    cli: Cli, bare: Any, wheel_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "python3.9"
    old.write_text('#!/bin/sh\necho "Python 3.9.18"\n')  # what an old interpreter answers
    old.chmod(0o755)
    result = bootstrap(cli, monkeypatch, wheel_cache, bare, "h1", "--python", str(old))
    assert result.code == 1
    assert f"host h1: {old} is Python 3.9.18; inferfleet needs 3.11 or newer" in result.stderr
    assert "apt-get install python3 python3-venv" in result.stderr
    assert "--python PATH" in result.stderr
    assert "Traceback" not in result.stderr
    assert untouched(bare)


def test_a_missing_python_is_refused_with_the_fix(
    cli: Cli, bare: Any, wheel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = bootstrap(cli, monkeypatch, wheel_cache, bare, "h1", "--python", "python3.99")
    assert result.code == 1
    assert "host h1: there is no python3.99 on the host's PATH" in result.stderr
    assert "python3-venv" in result.stderr
    assert untouched(bare)


def test_an_interpreter_name_that_is_not_one_is_bad_input(
    cli: Cli, bare: Any, wheel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = bootstrap(cli, monkeypatch, wheel_cache, bare, "h1", "--python", "-c evil")
    assert result.code == 2 and "is not an interpreter name or path" in result.stderr
    assert untouched(bare)


def test_a_dirty_checkout_on_the_host_is_refused_and_left_intact(
    cli: Cli, bare: Any, wheel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = bare.checkouts["h1"]
    git(bare.folder, "clone", "-q", str(bare.remote), str(checkout))
    (checkout / "README.md").write_text("# edited on the host\n")
    (checkout / "notes.txt").write_text("mine\n")
    result = bootstrap(cli, monkeypatch, wheel_cache, bare, "h1")
    assert result.code == 1
    assert "the host's checkout has local changes" in result.stderr
    assert "README.md" in result.stderr and "never overwrites them" in result.stderr
    assert f"git -C {checkout} stash" in result.stderr
    assert (checkout / "README.md").read_text() == "# edited on the host\n"
    assert (checkout / "notes.txt").read_text() == "mine\n"
    assert not (bare.folder / "hosts" / "h1" / "venv").exists()  # refused before any change


def test_a_checkout_with_commits_of_its_own_is_not_merged(
    cli: Cli, bare: Any, wheel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = bare.checkouts["h1"]
    git(bare.folder, "clone", "-q", str(bare.remote), str(checkout))
    git(checkout, "-c", "user.name=ops", "-c", "user.email=ops@h1", "commit", "-q",
        "--allow-empty", "-m", "a hotfix made on the host")  # fmt: skip
    theirs = git(checkout, "rev-parse", "HEAD").strip()
    bare.commit("ours moves on", {"docs/a.md": "a\n"})
    git(bare.operator, "push", "-q")
    result = bootstrap(cli, monkeypatch, wheel_cache, bare, "h1", "--deps", "wheelhouse")
    assert result.code == 1
    assert "cannot move to" in result.stderr and "without a merge" in result.stderr
    assert git(checkout, "rev-parse", "HEAD").strip() == theirs  # left as it was


def test_an_unreachable_host_is_a_clear_ssh_error(
    cli: Cli, lab: Lab, deploy_env: dict[str, str], tmp_path: Path, wheel_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    repo = bare_fleet(lab, tmp_path / "fleet", {})
    repo.data["hosts"]["h1"]["address"] = f"{lab.subnet}.99"  # nobody there
    repo.commit("h1 moved")
    result = bootstrap(cli, monkeypatch, wheel_cache, repo, "h1")
    assert result.code == 1
    assert f"host h1 ({lab.subnet}.99): cannot reach the host over ssh" in result.stderr
    assert "`ssh" in result.stderr and "Traceback" not in result.stderr


def test_a_local_host_or_unknown_host_is_bad_input(
    cli: Cli, bare: Any, wheel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare.data["hosts"]["here"] = {"address": "localhost"}
    bare.commit("a local host")
    local = bootstrap(cli, monkeypatch, wheel_cache, bare, "here")
    assert local.code == 2 and "is this machine" in local.stderr
    unknown = bootstrap(cli, monkeypatch, wheel_cache, bare, "h9")
    assert unknown.code == 2 and "no host named 'h9'" in unknown.stderr
    bad = bootstrap(cli, monkeypatch, wheel_cache, bare, "h1", "--deps", "carrier-pigeon")
    assert bad.code == 2 and "--deps 'carrier-pigeon'" in bad.stderr


def test_remote_unreachable_pushes_over_ssh_and_linger_failure_is_explained(
    cli: Cli,
    lab: Lab,
    deploy_env: dict[str, str],
    fake_runtime: Path,
    tiny_model: dict[str, Any],
    tmp_path: Path,
    wheel_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fleet's remote is out of the host's reach: the checkout arrives by git push over
    the ssh connection. A user unit there needs lingering, which this host (no logind)
    cannot grant: the error says so and how to fix it, after venv and checkout are done."""
    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND")
    service = {
        "host": "h2", "runtime": "fake", "model": "tiny", "bind": lab.hosts["h2"].address,
        "port": 8080, "ctx_per_slot": 512, "backend": "systemd", "unit": {"scope": "user"},
    }  # fmt: skip
    repo = bare_fleet(
        lab,
        tmp_path / "fleet",
        {"web": service},
        runtimes={"fake": {"kind": "llama.cpp", "binary": str(fake_runtime)}},
        models={"tiny": tiny_model},
    )
    # An origin the host cannot reach (nothing listens on port 9 of its loopback).
    git(repo.operator, "remote", "set-url", "origin", "ssh://git@127.0.0.1:9/fleet.git")
    result = bootstrap(cli, monkeypatch, wheel_cache, repo, "h2", "--deps", "wheelhouse")
    assert result.code == 1
    assert "loginctl enable-linger root failed on the host" in result.stderr
    assert "systemd-logind" in result.stderr and "L-38" in result.stderr
    checkout = repo.checkouts["h2"]
    assert git(checkout, "rev-parse", "HEAD").strip() == repo.head()
    assert git(checkout, "config", "--get", "remote.origin.url").strip() == (
        "ssh://git@127.0.0.1:9/fleet.git"
    )
    assert git(checkout, "for-each-ref", "refs/inferfleet").strip() == ""  # no leftover ref
    assert (repo.folder / "hosts" / "h2" / "venv" / "bin" / "inferfleet").exists()
    # --json keeps stdout for the document; a failure prints none.
    again = bootstrap(cli, monkeypatch, wheel_cache, repo, "h2", "--json")
    assert again.code == 1 and again.stdout == ""
    assert "checkout" in again.stderr and "already there" in again.stderr
