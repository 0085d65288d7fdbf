"""``doctor`` as a non-root ssh user on a host where root owns some of the fleet's files.

The user cannot enter the state dir's folder and cannot read a process
service's root-only ``secrets_env`` (L-55): each is a finding with its fix,
never a PermissionError traceback; an env file the user can read is not one.
As root the same fleet has neither finding. The user is a real one, run in a
forked copy of this (root) test process (helpers.as_user).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers.as_user import ensure_user, run_as
from helpers.cli import run_cli

from inferfleet import documents

USER = "iftest-doctor"


@pytest.fixture
def fleet() -> Iterator[dict[str, Path]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: it creates a test user and root-only files")
    ensure_user(USER)
    closed = Path(tempfile.mkdtemp(prefix="inferfleet-doctor-root-"))  # root's, 0700
    open_ = Path(tempfile.mkdtemp(prefix="inferfleet-doctor-open-"))
    try:
        open_.chmod(0o755)
        secret = closed / "a.env"
        secret.write_text("API_KEY=sk-root-only-0123456789\n")
        secret.chmod(0o600)
        shared = open_ / "open.env"
        shared.write_text("ENDPOINT=http://127.0.0.1:9/v1\n")
        shared.chmod(0o644)
        (open_ / "settings").mkdir()
        (open_ / "settings" / "web.yml").write_text('endpoint: "${ENDPOINT}"\n')
        (open_ / "tiny").mkdir()
        (open_ / "tiny" / "tiny.gguf").write_bytes(b"GGUF" + bytes(6))
        data = {
            "version": 1,
            "hosts": {"here": {"address": "127.0.0.1", "state_dir": str(closed / "state")}},
            "runtimes": {"fake": {"kind": "llama.cpp", "binary": "/bin/true"}},
            "models": {
                "tiny": {
                    "source": {"path": str(open_ / "tiny")},
                    "files": [{"path": "tiny.gguf", "size": 10}],
                }
            },
            "services": {
                "a": {
                    "host": "here",
                    "runtime": "fake",
                    "model": "tiny",
                    "port": 9,
                    "ctx_per_slot": 512,
                    "secrets_env": str(secret),
                    "settings": [
                        {
                            "template": "settings/web.yml",
                            "dest": str(open_ / "out" / "web.yml"),
                            "allow": ["ENDPOINT"],
                            "env_files": [str(shared)],
                        }
                    ],
                }
            },
        }
        (open_ / "fleet.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        yield {"file": open_ / "fleet.yaml", "secret": secret, "shared": shared, "closed": closed}
    finally:
        shutil.rmtree(closed, ignore_errors=True)
        shutil.rmtree(open_, ignore_errors=True)


def doctor(file: Path) -> tuple[int, str, str]:
    done = run_cli(pytest.MonkeyPatch(), "doctor", "--file", str(file), "--json")
    return done.code, done.stdout, done.stderr


def findings(stdout: str) -> list[dict[str, Any]]:
    doc = json.loads(stdout)
    jsonschema.validate(doc, documents.json_schema("inferfleet.doctor/v1"))
    (host,) = doc["hosts"]
    return [f for f in host["findings"] if f["check"] in {"env-file", "access"}]


def test_root_only_files_are_findings_for_a_non_root_user(fleet: dict[str, Path]) -> None:
    code, stdout, stderr = doctor(fleet["file"])  # as root: both readable (warms imports too)
    assert code == 0, stderr
    assert findings(stdout) == []

    code, stdout, stderr = run_as(
        USER, lambda: doctor(fleet["file"]), env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"}
    )
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert code == 1  # an env file apply must read is unreadable: an error finding
    found = {f["check"]: f for f in findings(stdout)}
    assert set(found) == {"env-file", "access"}
    env = found["env-file"]
    assert env["severity"] == "error" and env["lesson"] == "L-55"
    assert env["message"] == (
        f"{fleet['secret']}: permission denied for {USER} (apply starts a with its secrets)"
    )
    assert f"readable by {USER}" in env["fix"]
    access = found["access"]
    assert access["severity"] == "warning"
    assert f"lies under {fleet['closed']}, which {USER} may not enter" in access["message"]
    facts = json.loads(stdout)["hosts"][0]["facts"]
    assert {e["path"]: e["problem"] for e in facts["env_files"]} == {
        str(fleet["shared"]): None,
        str(fleet["secret"]): "permission denied",
    }
    (state,) = [d for d in facts["disks"] if d["path"].startswith(str(fleet["closed"]))]
    assert state["denied"] == str(fleet["closed"]) and state["free"] > 0
