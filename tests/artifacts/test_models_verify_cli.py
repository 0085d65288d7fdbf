"""``inferfleet models verify`` runs the deploy gate's code path and reports every problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from artifact_helpers import write_file


def fleet_with(tmp_path: Path, files: list[dict[str, Any]]) -> Path:
    data = {
        "version": 1,
        "hosts": {"local": {"address": "localhost"}},
        "models": {"m": {"source": {"path": str(tmp_path / "model")}, "files": files}},
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_verify_reports_every_problem_then_fails(cli: Any, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    good = write_file(folder, "good.gguf", b"GGUF good")
    bad = write_file(folder, "bad.gguf", b"GGUF bad!")
    declared = [good, {**bad, "sha256": "e" * 64}, {"path": "gone.gguf", "size": 1}]
    fleet = fleet_with(tmp_path, declared)
    result = cli("models", "verify", "m", "-f", str(fleet), "--json")
    assert result.code == 1
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.models.verify/v1" and not doc["ok"]
    assert {f["path"]: f["status"] for f in doc["files"]} == {
        "bad.gguf": "wrong-hash",
        "gone.gguf": "missing",
        "good.gguf": "ok",
    }
    assert "2 of 3 declared file(s)" in result.stderr and "Traceback" not in result.stderr

    fixed = fleet_with(tmp_path, [good, bad])
    ok = cli("models", "verify", "m", "-f", str(fixed))
    assert ok.code == 0, ok.stderr
    assert "2 declared file(s) verified" in ok.stdout
    # good.gguf was recorded by the failed run already; now both come from the record.
    again = json.loads(cli("models", "verify", "m", "-f", str(fixed), "--json").stdout)
    assert {f["method"] for f in again["files"]} == {"record"}


def test_an_unknown_model_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    fleet = fleet_with(tmp_path, [{"path": "x", "size": 1}])
    result = cli("models", "verify", "nope", "-f", str(fleet))
    assert result.code == 2 and "no model named 'nope'" in result.stderr
