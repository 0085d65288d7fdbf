"""A real ``inferfleet`` process with huggingface_hub's environment set for the test Hub."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hubserver import HubServer


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m inferfleet ARGS``: huggingface_hub reads HF_* at import, as for a user."""
    return subprocess.run(
        [sys.executable, "-m", "inferfleet", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def hf_environment(tmp_path: Path, hub: HubServer) -> dict[str, str]:
    """HF_HOME under tmp_path, HF_ENDPOINT at the test Hub, no login, own inferfleet dirs."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "INFERFLEET_"))}
    return {
        **base,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": hub.endpoint,
        "HF_TOKEN_PATH": str(tmp_path / "no-login" / "token"),
        "INFERFLEET_CACHE_DIR": str(tmp_path / "cache"),
        "INFERFLEET_STATE_DIR": str(tmp_path / "state"),
        "COLUMNS": "250",
    }


def hub_cache(tmp_path: Path) -> Path:
    """huggingface_hub's cache under that HF_HOME."""
    return tmp_path / "hf" / "hub"
