"""git for tests: a fixed identity and no user or system config, so commits are reproducible."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Fleet Operator",
    "GIT_AUTHOR_EMAIL": "ops@example.invalid",
    "GIT_COMMITTER_NAME": "Fleet Operator",
    "GIT_COMMITTER_EMAIL": "ops@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


def git(cwd: Path, *args: str) -> str:
    """Run ``git ARGS`` in ``cwd``; its stdout, stripped. A failure fails the test with stderr."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=GIT_ENV, timeout=60
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()
