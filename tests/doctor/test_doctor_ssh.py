"""``inferfleet doctor HOST`` on a test host over the deploy's ssh connector (facts read there)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml
from deploy_hosts import Lab
from helpers.cli import CliResult

from inferfleet import documents

Cli = Callable[..., CliResult]
pytestmark = pytest.mark.needs_root


def _fleet(lab: Lab, tmp_path: Path, device: dict[str, object] | None = None) -> Path:
    host = lab.hosts["h1"]
    spec: dict[str, object] = {"address": host.address, "state_dir": str(tmp_path / "state-h1")}
    if device is not None:
        spec["devices"] = [device]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hosts": {"h1": spec}}))
    return path


def test_doctor_on_a_test_host_over_ssh(
    cli: Cli, lab: Lab, deploy_env: dict[str, str], tmp_path: Path
) -> None:
    fleet = _fleet(lab, tmp_path)
    result = cli("doctor", "--host", "h1", "--file", str(fleet), "--json")
    assert result.code == 0, result.stderr
    doc = result.document()
    jsonschema.validate(doc, documents.json_schema("inferfleet.doctor/v1"))
    (host,) = doc["hosts"]
    assert host["host"] == "h1" and host["local"] is False
    facts = host["facts"]
    assert facts["gpu_source"] is None and facts["ram"] > 0
    assert [d["path"] for d in facts["disks"]] == [str(tmp_path / "state-h1")]
    # A fleet that declares a GPU there is told plainly that none was found (exit 1).
    with_gpu = _fleet(lab, tmp_path, {"name": "gpu0", "vendor": "nvidia", "memory": "24GiB"})
    failed = cli("doctor", "h1", "--file", str(with_gpu))
    assert failed.code == 1 and "no GPU was found on h1" in failed.stdout


def test_a_host_that_does_not_answer_with_facts(
    cli: Cli,
    lab: Lab,
    deploy_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INFERFLEET_REMOTE_COMMAND", "echo not-inferfleet")
    result = cli("doctor", "h1", "--file", str(_fleet(lab, tmp_path)))
    assert result.code == 1
    assert "inferfleet doctor on h1 did not answer with its facts" in result.stderr
    assert "INFERFLEET_REMOTE_COMMAND" in result.stderr


def test_a_host_answering_a_mistyped_document_is_refused(
    cli: Cli,
    lab: Lab,
    deploy_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The remote's answer is outside input: typed before a single fact is used."""
    liar = tmp_path / "liar"
    liar.write_text(
        '#!/bin/sh\necho \'{"schema": "inferfleet.doctor/v1", "ok": true, "hosts": '
        '[{"host": "h1", "facts": {"ram": "lots"}}]}\'\n'
    )
    liar.chmod(0o755)
    monkeypatch.setenv("INFERFLEET_REMOTE_COMMAND", str(liar))
    result = cli("doctor", "h1", "--file", str(_fleet(lab, tmp_path)), "--json")
    assert result.code == 1 and result.stdout == ""
    assert "did not answer with its facts" in result.stderr
