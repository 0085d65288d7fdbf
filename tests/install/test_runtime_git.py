"""llama.cpp (or a fork) built from git at a commit, with patches of the fleet repository.

A local bare repository is made from the pinned llama.cpp source (the sdist
scripts/test caches) with one commit on top that prints a line in `--version`
(the fork's visible change); the fleet repository carries one patch that
prints another. `runtime install` builds exactly that commit with the patch
(the record names the commit and the patch's sha256, `--version` shows both
lines and the commit), a second install is instant, and `runtime adopt` on
the built binary gives a fleet file that `up` serves. A commit that is not in
the repository, a patch that does not apply, an unreachable repository and a
changed patch each fail clearly (or rebuild) with nothing half-built left.

The repository's commits are made with fixed names and dates, so the commit id
(and the build's cache folder) is the same on every machine: CI builds the
fork once and keeps it in the cache like the pinned build.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers import free_port
from helpers.git_fork import PATCH, bare_fork, patch_text
from helpers.git_fork import source as fork_source
from helpers.real_server import SERVICE, fleet_data, state_dir

from inferfleet import paths
from inferfleet.errors import RuntimeInstallError
from inferfleet.fleetfile.fleet import RuntimeSource
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import llamacpp_build

pytestmark = [pytest.mark.slow, pytest.mark.source_build]

Cli = Callable[..., Any]


@pytest.fixture(scope="module")
def fork() -> tuple[Path, str]:
    """(the bare repository, the commit on top): made once per machine, deterministically."""
    return bare_fork()


def fleet_repo(folder: Path, bare: Path, commit: str) -> Path:
    """A fleet repository whose runtime is the fork at ``commit`` with one patch."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "patches").mkdir(exist_ok=True)
    (folder / PATCH).write_text(patch_text(bare, commit, folder / "scratch"))
    data = fleet_data(free_port())
    data["runtimes"] = {"fork": {"kind": "llama.cpp", "source": fork_source(bare, commit)}}
    data["services"][SERVICE]["runtime"] = "fork"
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def leftovers(source: RuntimeSource) -> list[Path]:
    """Half-built folders next to the cache folder of ``source``."""
    folder = llamacpp_build.install_dir(source)
    return [p for p in folder.parent.glob(".build-*")] + (
        [folder] if folder.exists() and not (folder / llamacpp_build.RECORD).exists() else []
    )


def built_folders() -> list[str]:
    """The builds in the cache (lock files aside)."""
    folder = paths.cache_dir() / "runtimes" / "llama.cpp"
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock"))


def test_the_fork_at_its_commit_with_the_patch_is_built_recorded_and_served(
    cli: Cli, tmp_path: Path, fork: tuple[Path, str], gemma_file: Path
) -> None:
    bare, commit = fork
    fleet = fleet_repo(tmp_path / "repo", bare, commit)
    loaded = load_fleet(fleet)
    source = loaded.fleet.runtimes["fork"].source
    assert source is not None
    built = cli("runtime", "install", "llama.cpp", "--runtime", "fork", "-f", str(fleet), "--json")
    assert built.code == 0, built.stderr
    record = llamacpp_build.installed(source, loaded.root)
    assert record is not None
    patch = (tmp_path / "repo" / "patches" / "say-patched.patch").read_bytes()
    assert record.commit == commit and record.package == str(bare)
    assert record.patches == [
        {"path": "patches/say-patched.patch", "sha256": hashlib.sha256(patch).hexdigest()}
    ]
    version = subprocess.run(
        [record.binary, "--version"], capture_output=True, text=True, timeout=60
    )
    said = version.stdout + version.stderr
    # The fork's commit and the patch are both in the binary, and it names its tree.
    assert "fork: the inferfleet test commit" in said
    assert "patched: the inferfleet test patch" in said
    assert f"commit {commit[:12]}+p" in said
    assert record.version_text in said
    # A second install is instant: the cached build.
    again = cli("runtime", "install", "llama.cpp", "--runtime", "fork", "-f", str(fleet))
    assert again.code == 0 and "already" in (again.stdout + again.stderr).lower()
    assert not leftovers(source)

    # Adopted as a binary runtime, `up` serves through it.
    adopted = tmp_path / "adopted" / "fleet.yaml"
    adopted.parent.mkdir()
    data = fleet_data(free_port())
    adopted.write_text(yaml.safe_dump(data, sort_keys=False))
    done = cli("runtime", "adopt", record.binary, "--use-for", SERVICE, "-f", str(adopted))
    assert done.code == 0, done.stderr
    runtime_name = load_fleet(adopted).fleet.services[SERVICE].runtime
    with state_dir(tmp_path / "state"):
        up = cli("up", str(adopted))
        try:
            assert up.code == 0, up.stderr
            port = data["services"][SERVICE]["port"]
            assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
            props = httpx.get(f"http://127.0.0.1:{port}/props", timeout=10).json()
            assert commit[:12] in str(props.get("build_info", "")), props.get("build_info")
        finally:
            cli("down", "-f", str(adopted))
    assert runtime_name is not None and runtime_name != "llama-cpp"


def test_a_changed_patch_is_not_the_build_made_with_the_old_one(
    tmp_path: Path, fork: tuple[Path, str]
) -> None:
    bare, commit = fork
    fleet = fleet_repo(tmp_path / "repo", bare, commit)
    loaded = load_fleet(fleet)
    source = loaded.fleet.runtimes["fork"].source
    assert source is not None
    patch = tmp_path / "repo" / "patches" / "say-patched.patch"
    patch.write_text(patch.read_text().replace("the inferfleet test patch", "another patch"))
    # Same folder (the patch's name is the key), other contents: not installed any more.
    assert llamacpp_build.installed(source, loaded.root) is None
    assert llamacpp_build.installed(source) is not None  # what is there, for `runtime list`


@pytest.mark.parametrize("case", ["unknown commit", "patch does not apply", "unreachable"])
def test_a_bad_source_fails_clearly_and_leaves_nothing_half_built(
    tmp_path: Path, fork: tuple[Path, str], case: str
) -> None:
    bare, commit = fork
    fleet = fleet_repo(tmp_path / "repo", bare, commit)
    if case == "unknown commit":
        fleet.write_text(fleet.read_text().replace(commit, "'" + "0" * 40 + "'"))
        said = f"commit {'0' * 40} is not in {bare}"
    elif case == "patch does not apply":
        # A patch made against another tree: its context is not at that commit.
        patch = tmp_path / "repo" / "patches" / "say-patched.patch"
        patch.write_text(patch.read_text().replace("fork: the inferfleet test commit", "x"))
        said = "patch patches/say-patched.patch does not apply to " + commit[:12]
    else:
        # Another flag set (a build that is not cached), from a repository that is gone.
        data = yaml.safe_load(fleet.read_text())
        data["runtimes"]["fork"]["source"]["git"] = str(tmp_path / "gone.git")
        data["runtimes"]["fork"]["source"]["cmake"] = {"INFERFLEET_TEST_FLAG": "ON"}
        fleet.write_text(yaml.safe_dump(data, sort_keys=False))
        said = f"fetching {tmp_path / 'gone.git'} failed"
    loaded = load_fleet(fleet)
    source = loaded.fleet.runtimes["fork"].source
    assert source is not None
    before = built_folders()
    with pytest.raises(RuntimeInstallError) as caught:
        llamacpp_build.install(source, root=loaded.root)
    text = caught.value.render()
    assert said in text, text
    assert "Traceback" not in text
    assert not leftovers(source)
    assert built_folders() == before  # nothing half-built, nothing new
