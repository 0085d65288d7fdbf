"""A safetensors model's facts (config.json and weight headers) recorded in the fleet
repository: a checkout without the folder sizes its vLLM service as the host would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import run_cli
from st_models import declared, vllm_fleet, write_model


def _repo(tmp_path: Path) -> Path:
    write_model(tmp_path / "m")
    (tmp_path / "repo").mkdir()
    return vllm_fleet(tmp_path / "repo", {"path": str(tmp_path / "m")}, declared(tmp_path / "m"))


def test_recorded_folder_sizes_the_service_without_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    fleet = _repo(tmp_path)
    before = json.loads(run_cli(monkeypatch, "budget", "-f", str(fleet), "--json").stdout)
    recorded = run_cli(monkeypatch, "facts", "record", str(fleet))
    assert recorded.code == 0, recorded.stdout + recorded.stderr
    assert "recorded model 'm': facts/models/m.json (1 weight file(s)" in " ".join(
        recorded.stdout.split()
    )
    shutil.rmtree(tmp_path / "m")  # CI has no model folder
    after = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
    assert after.code == 0, after.stdout + after.stderr
    (now,), (then,) = json.loads(after.stdout)["vllm"], before["vllm"]
    assert now.pop("model").startswith("recorded/m@") and then.pop("model") == str(tmp_path / "m")
    assert now == then  # the same figures as on the machine with the files
    checked = run_cli(monkeypatch, "check", str(fleet))
    said = " ".join(checked.stdout.split())
    assert "config and headers from facts/models/m.json" in said
    doc = json.loads(run_cli(monkeypatch, "check", str(fleet), "--json").stdout)
    # The fit rules judge from the record; the declared files' sizes are still checked
    # on the host (a path model), and this runtime's flag list where its binary is.
    skipped = {s["rule"] for s in doc["skipped"]}
    assert skipped == {"declared-files-match-source", "extra-args-unknown-flag"}, skipped


def test_a_folder_declared_without_sha256_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    write_model(tmp_path / "m")
    (tmp_path / "repo").mkdir()
    files = [{k: v for k, v in f.items() if k != "sha256"} for f in declared(tmp_path / "m")]
    fleet = vllm_fleet(tmp_path / "repo", {"path": str(tmp_path / "m")}, files)
    result = run_cli(monkeypatch, "facts", "record", str(fleet))
    assert result.code == 1
    assert "a declared file has no sha256" in " ".join(result.stdout.split())
    assert not (tmp_path / "repo" / "facts" / "models" / "m.json").exists()


def test_a_record_for_other_files_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    fleet = _repo(tmp_path)
    assert run_cli(monkeypatch, "facts", "record", str(fleet)).code == 0
    shutil.rmtree(tmp_path / "m")
    text = fleet.read_text()
    first = text.index("sha256: ") + len("sha256: ")
    fleet.write_text(text[:first] + "d" * 64 + text[first + 64 :])  # config.json changed
    checked = run_cli(monkeypatch, "check", str(fleet))
    said = " ".join(checked.stdout.split())
    assert "recorded facts not used" in said and "not checked" in said
