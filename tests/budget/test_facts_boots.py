"""Measured boots recorded in the fleet repository (L-27): ``facts record --from-log``
keeps what llama-server reported at boot, and ``budget`` and ``check``'s
device-memory-fit price the service by it in a checkout without the model file.

The logs are real llama-server b11434 boots of the real Gemma 3 270M (tests/budget/data).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from budget_helpers import DATA, GEMMA, MIB, needs_gemma, write_fleet

pytestmark = needs_gemma
Cli = Callable[..., Any]
JSONL = DATA / "llama-server-b11434-gemma3-c8192-np2.jsonl"


def _recorded_repo(cli: Cli, tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    fleet = write_fleet(tmp_path / "repo", {})
    model = cli("facts", "record", str(fleet))
    assert model.code == 0, model.stdout + model.stderr
    boots = cli("facts", "record", str(fleet), "--from-log", f"svc={JSONL}")
    assert boots.code == 0, boots.stdout + boots.stderr
    said = " ".join(boots.stdout.split())
    assert "recorded service 'svc': facts/services/svc.json (1 boot(s)" in said
    return fleet


def _clean_clone(fleet: Path, to: Path) -> Path:
    """CI's checkout: the fleet repo and its facts/, the model folder elsewhere (on the host)."""
    shutil.copytree(fleet.parent, to)
    clone = to / "fleet.yaml"
    clone.write_text(clone.read_text().replace(str(GEMMA.parent), "/srv/models/gemma"))
    return clone


def test_budget_in_a_clean_clone_uses_the_recorded_boot(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    fleet = _recorded_repo(cli, tmp_path)
    record = json.loads((fleet.parent / "facts" / "services" / "svc.json").read_text())
    assert record["model"] == "gemma" and len(record["boots"]) == 1
    clone = _clean_clone(fleet, tmp_path / "clone")
    result = cli("budget", "svc", "-f", str(clone), "--json")
    assert result.code == 0, result.stdout + result.stderr
    service = json.loads(result.stdout)["services"][0]
    device = service["devices"][0]
    # The same figures as `budget --from-log` on the host: measured, not estimated.
    assert device["measured"] is True and device["weights"] == (235 + 12 + 23) * MIB
    human = cli("budget", "svc", "-f", str(clone))
    out = " ".join(human.stdout.split())
    assert "priced by 1 measured boot(s) from facts/services/svc.json" in out
    assert "header facts from facts/models/gemma.json" in out
    checked = cli("check", str(clone), "--require-facts")
    said = " ".join(checked.stdout.split())
    assert "priced by 1 measured boot(s)" in said and "device-memory-fit" not in said
    # Nothing skipped: every fact is recorded (the header rules judge the recorded header:
    # this fleet's own findings, a base model without a template, still show).
    assert "not checked" not in said and "chat-template-missing" in said


def test_boots_of_another_model_file_are_not_used(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    fleet = _recorded_repo(cli, tmp_path)
    where = fleet.parent / "facts" / "services" / "svc.json"
    record = json.loads(where.read_text())
    record["model_sha256"] = "c" * 64
    where.write_text(json.dumps(record))
    result = cli("budget", "svc", "-f", str(fleet))
    out = " ".join(result.stdout.split())
    assert result.code == 0 and "recorded boots not used" in out and "cccccccccccc" in out


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("svc", "expected SERVICE=LOG"),
        ("nope=x.log", "no llm service named 'nope'"),
        ("svc=/nonexistent/boot.log", "cannot read the log"),
    ],
)
def test_a_bad_log_argument_records_nothing(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arg: str, message: str
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    fleet = write_fleet(tmp_path, {})
    assert cli("facts", "record", str(fleet)).code == 0
    result = cli("facts", "record", str(fleet), "--from-log", arg)
    assert result.code == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "facts" / "services").exists()
