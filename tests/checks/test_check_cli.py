"""``inferfleet check`` through the real entry point: outputs and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from check_helpers import BASE
from helpers import ROOT

from inferfleet.checks.engine import catalogue

BROKEN = ROOT / "tests" / "fixtures" / "fleets" / "broken.yaml"
HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"


def test_broken_fleet_fails_with_every_incident_on_its_line(cli: Any) -> None:
    result = cli("check", str(BROKEN))
    assert result.code == 1
    out = result.stdout
    for expected in (
        "broken.yaml:14:12: error L-42 image-not-pinned runtimes.vllm.image",
        "broken.yaml:31:17: error L-20 quantized-v-needs-flash-attn services.chat.flash_attn",
        "broken.yaml:33:17: error L-24 env-runtime-name services.chat.env.TEMP",
        "error L-26 client-window-overflow services.chat.client.max_tokens",
        "error L-32 gpu-memory-utilization-cap services.batch.gpu_memory_utilization",
        "fix: set flash_attn: on",
        "failed: 5 errors",
    ):
        assert expected in out, out


def test_homelab_example_passes(cli: Any) -> None:
    result = cli("check", str(HOMELAB), "--offline")  # its Hub models are illustrative
    assert result.code == 0, result.stdout
    assert result.stdout.splitlines()[-1].startswith("passed") and "warning" not in result.stdout


def test_json_document(cli: Any) -> None:
    result = cli("check", str(BROKEN), "--json")
    assert result.code == 1
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.check/v1" and doc["ok"] is False
    # batch is vLLM on a safetensors folder not on this machine: its KV capacity is skipped.
    assert doc["counts"] == {"error": 5, "warning": 0, "skipped": 7, "waived": 0, "causes": 3}
    first = doc["findings"][0]
    assert set(first) == {
        "rule", "lesson", "severity", "service", "field", "line", "column", "message", "hint",
        "waived", "reason",
    }  # fmt: skip
    assert {s["rule"] for s in doc["skipped"]} == {
        "gguf-unknown-types", "chat-template-missing", "context-beyond-training",
        "device-memory-fit", "declared-files-match-source", "vllm-kv-capacity",
    }  # fmt: skip


def test_sarif_for_code_scanning(cli: Any) -> None:
    result = cli("check", str(BROKEN), "--sarif")
    assert result.code == 1
    doc = json.loads(result.stdout)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert len(rules) == len(catalogue())
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] == "error"
        assert res["locations"][0]["physicalLocation"]["region"]["startLine"] > 0


def test_list_prints_the_catalogue(cli: Any) -> None:
    result = cli("check", "--list", "--json")
    assert result.code == 0
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.check.rules/v1"
    ids = [r["id"] for r in doc["rules"]]
    assert len(ids) == len(set(ids)) >= 25
    lessons = {r["lesson"] for r in doc["rules"]}
    # Every lesson marked "check" in lessons.md has at least one rule.
    marked = {"L-06", "L-10", "L-12", "L-13", "L-14", "L-15", "L-16", "L-17", "L-18", "L-19",
              "L-20", "L-21", "L-22", "L-24", "L-26", "L-31", "L-32", "L-38", "L-39", "L-42",
              "L-55", "L-56"}  # fmt: skip
    assert marked <= lessons
    human = cli("check", "--list")
    assert "spec-one-drafter" in human.stdout and "L-14" in human.stdout


def test_strict_fails_on_warnings(cli: Any, tmp_path: Path) -> None:
    import yaml

    data = json.loads(json.dumps(BASE))
    data["runtimes"]["lcpp"]["source"].pop("commit")  # source-not-pinned: a warning
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli("check", str(path)).code == 0
    strict = cli("check", str(path), "--strict")
    assert strict.code == 1 and "warning L-42 source-not-pinned" in strict.stdout


def test_invalid_fleet_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("hosts: {a: {}}\nservices:\n  s: {host: a, port: 1, kind: container}\n")
    result = cli("check", str(path))
    assert result.code == 2 and "a container service needs image" in result.stderr


def test_json_and_sarif_together_is_refused(cli: Any) -> None:
    result = cli("check", str(BROKEN), "--json", "--sarif")
    assert result.code == 2 and "pick one" in result.stderr
