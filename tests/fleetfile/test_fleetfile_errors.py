"""Malformed fleet files: each names the line, says what is wrong and how to fix it.

Run through the real CLI entry point (`inferfleet validate`), so the exit code
(2) and the absence of a traceback are part of what is tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

BASE = """\
version: 1
hosts:
  gpu1:
    address: 10.0.0.5
    devices:
      - name: rtx
        vendor: nvidia
        memory: 24GiB
runtimes:
  lcpp:
    kind: llama.cpp
    binary: /opt/llama/bin/llama-server
models:
  qwen:
    source:
      hub: Qwen/Qwen3-8B-GGUF
      revision: 0123456789abcdef0123456789abcdef01234567
    files:
      - path: qwen3-8b-q4_k_m.gguf
        size: 5GiB
services:
  chat:
    host: gpu1
    runtime: lcpp
    model: qwen
    port: 8080
    ctx_per_slot: 32768
    parallel: 2
    devices: [rtx]
    health:
      timeout: 20m
"""

# (id, old text, new text, line, message fragment, hint fragment)
CASES = [
    (
        "unknown-key-typo",
        "    port: 8080",
        "    prot: 8080",
        26,
        "unknown key 'prot'",
        "did you mean 'port'?",
    ),
    (
        "unknown-top-level",
        "version: 1\n",
        "version: 1\nservice: {}\n",
        2,
        "unknown key 'service'",
        "did you mean 'services'?",
    ),
    (
        "yaml-syntax",
        "    parallel: 2\n",
        "    parallel: [2\n",
        29,
        "YAML syntax error",
        "indentation",
    ),
    ("tab-indent", "    port: 8080", "\tport: 8080", 26, "YAML syntax error", "spaces, not tabs"),
    (
        "duplicate-key",
        "    parallel: 2\n",
        "    parallel: 2\n    parallel: 4\n",
        29,
        "duplicate key 'parallel' (first at line 28)",
        "remove or rename",
    ),
    (
        "health-from-unknown",
        "    address: 10.0.0.5\n",
        "    address: 10.0.0.5\n    health_from: here\n",
        5,
        "hosts.gpu1.health_from: Input should be 'auto' or 'host'",
        "use one of: 'auto' or 'host'",
    ),
    ("bad-size", "memory: 24GiB", "memory: 24 gigs", 8, "'24 gigs' is not a size", ""),
    ("bad-duration", "timeout: 20m", "timeout: twenty minutes", 31, "is not a duration", ""),
    (
        "unknown-host",
        "    host: gpu1",
        "    host: gpu2",
        23,
        "runs on host 'gpu2', which is not in hosts",
        "known hosts: gpu1",
    ),
    (
        "unknown-model",
        "    model: qwen",
        "    model: llama",
        25,
        "serves model 'llama', which is not in models",
        "known models: qwen",
    ),
    (
        "unknown-runtime",
        "    runtime: lcpp",
        "    runtime: vllm",
        24,
        "uses runtime 'vllm', which is not in runtimes",
        "known runtimes: lcpp",
    ),
    (
        "unknown-device",
        "devices: [rtx]",
        "devices: [rtx, mi300]",
        29,
        "device 'mi300' is not a device of host 'gpu1'",
        "known devices of gpu1: rtx",
    ),
    (
        "bad-runtime-kind",
        "kind: llama.cpp",
        "kind: llamacpp",
        11,
        "runtimes.lcpp.kind",
        "use one of: 'llama.cpp', 'vllm' or 'sglang'",
    ),
    (
        "bad-vendor",
        "vendor: nvidia",
        "vendor: nvida",
        7,
        "hosts.gpu1.devices[0].vendor",
        "'nvidia'",
    ),
    ("port-out-of-range", "port: 8080", "port: 80800", 26, "less than or equal to 65535", ""),
    ("port-not-a-number", "port: 8080", "port: eighty", 26, "services.chat.port", "whole number"),
    (
        "missing-required",
        "    port: 8080\n",
        "",
        22,
        "missing required key 'port' in services.chat",
        "add `port:`",
    ),
    (
        "llm-without-ctx",
        "    ctx_per_slot: 32768\n",
        "",
        22,
        "an llm service needs ctx_per_slot",
        "",
    ),
    (
        "source-kind",
        "      hub: Qwen/Qwen3-8B-GGUF\n      revision: 0123456789abcdef0123456789abcdef01234567\n",
        "      url: https://example.invalid/x\n",
        15,
        "a model source needs exactly one of: hub, path, package",
        "source: {package:",
    ),
    (
        "bad-sha256",
        "        size: 5GiB\n",
        "        size: 5GiB\n        sha256: XYZ\n",
        21,
        "sha256 must be 64 lower-case hex characters",
        "",
    ),
    (
        "bad-name",
        "  chat:\n",
        "  Chat Bot:\n",
        22,
        "invalid name 'Chat Bot' in services",
        "lower-case",
    ),
    ("version-2", "version: 1", "version: 2", 1, "version", "write `version: 1`"),
    (
        "runtime-no-origin",
        "    binary: /opt/llama/bin/llama-server\n",
        "",
        10,
        "a runtime needs one of binary, image or source",
        "",
    ),
    (
        "escaping-model-path",
        "path: qwen3-8b-q4_k_m.gguf",
        "path: ../../etc/passwd",
        19,
        "must be relative and stay inside",
        "",
    ),
    (
        "bad-bind",
        "    port: 8080\n",
        "    port: 8080\n    bind: localhost\n",
        27,
        "bind must be an IP address",
        "",
    ),
    ("not-a-mapping", BASE, "- just\n- a list\n", 1, "must be a mapping", "inferfleet init"),
    ("empty-file", BASE, "", 1, "the fleet file is empty", ""),
]


@pytest.mark.parametrize(
    ("old", "new", "line", "message", "hint"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_malformed_fleet_is_refused_with_line_and_fix(
    cli, tmp_path: Path, old: str, new: str, line: int, message: str, hint: str
) -> None:
    path, err = refused_by_validate(cli, tmp_path, old, new)
    assert f"{path}:{line}:" in err, err
    assert message in err, err
    if hint:
        assert " -- " in err and hint in err, err


def test_base_fleet_is_valid(cli, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE)
    result = cli("validate", str(path))
    assert result.code == 0, result.stderr
    assert "1 hosts, 1 runtimes, 1 models, 1 services" in result.stdout


def test_several_errors_are_reported_together_in_line_order(cli, tmp_path: Path) -> None:
    text = BASE.replace("vendor: nvidia", "vendor: nvida").replace(
        "    port: 8080", "    prot: 8080"
    )
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    result = cli("validate", str(path))
    assert result.code == 2
    lines = [ln for ln in result.stderr.splitlines() if str(path) in ln]
    assert f"{path}:7:" in lines[0] and f"{path}:26:" in result.stderr


def test_port_clash_on_same_host_and_wildcard(cli, tmp_path: Path) -> None:
    text = (
        BASE
        + """\
  embed:
    host: gpu1
    runtime: lcpp
    model: qwen
    port: 8080
    bind: 0.0.0.0
    ctx_per_slot: 2048
"""
    )
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    result = cli("validate", str(path))
    assert result.code == 2
    assert f"{path}:36:" in result.stderr
    assert "port 8080 on host 'gpu1' is already used by service 'chat'" in result.stderr


def test_validate_json_reports_errors_as_data(cli, tmp_path: Path) -> None:
    import json

    path = tmp_path / "fleet.yaml"
    path.write_text(BASE.replace("    host: gpu1", "    host: gpu2"))
    result = cli("validate", str(path), "--json")
    assert result.code == 2
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.validate/v1"
    assert doc["valid"] is False
    assert doc["errors"][0]["line"] == 23
    assert "known hosts: gpu1" in doc["errors"][0]["hint"]


def test_missing_file_names_the_path_and_the_fix(cli, tmp_path: Path) -> None:
    result = cli("validate", str(tmp_path / "nope.yaml"))
    assert result.code == 2
    assert "fleet file not found" in result.stderr and "inferfleet init" in result.stderr


def test_debug_env_shows_traceback(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE.replace("    host: gpu1", "    host: gpu2"))
    monkeypatch.setenv("INFERFLEET_DEBUG", "1")
    result = cli("validate", str(path))
    assert result.code == 2
    assert "Traceback" in result.stderr


def refused_by_validate(cli: Any, tmp_path: Path, old: str, new: str) -> tuple[Path, str]:
    """``validate`` of BASE with ``old`` replaced by ``new``: exit 2; the file and the error."""
    assert old in BASE
    path = tmp_path / "fleet.yaml"
    path.write_text(BASE.replace(old, new, 1))
    result = cli("validate", str(path))
    assert result.code == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    return path, " ".join(result.stderr.split())
