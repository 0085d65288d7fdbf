"""`render --target llama-swap` then `import llama-swap`: the same fleet comes back.

The fleet is written by hand; its services' ports are the ones llama-swap
hands out (startPort upwards in sorted model order, a group's members on
their first member's port), since under llama-swap the ports are its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml
from helpers.cli import CliResult

from inferfleet.fleetfile.loader import load_fleet

Cli = Callable[..., CliResult]

BASE = """\
version: 1
hosts:
  box:
    address: localhost
    devices:
      - name: gpu0
        vendor: nvidia
        memory: 24GiB
runtimes:
  llama-cpp:
    kind: llama.cpp
    binary: /opt/llama/bin/llama-server
"""

SERVICES = """\
models:
  gemma:
    source:
      path: {models}
    files:
      - path: gemma-3-270m-it-Q4_K_M.gguf
        size: 4096
  qwen:
    source:
      path: {models}
    files:
      - path: Qwen3-8B-Q4_K_M-00001-of-00002.gguf
        size: 1000
      - path: Qwen3-8B-Q4_K_M-00002-of-00002.gguf
        size: 2000
groups:
  big:
    max_loaded: 1
    idle_unload: 5m
services:
  alpha:
    host: box
    runtime: llama-cpp
    model: qwen
    group: big
    port: 8100
    ctx_per_slot: 8192
    parallel: 2
    devices: [gpu0]
    kv_cache: {{k: q8_0, v: q4_0}}
    jinja: true
  beta:
    host: box
    runtime: llama-cpp
    model: gemma
    group: big
    port: 8100
    ctx_per_slot: 4096
    devices: [gpu0]
    flash_attn: "on"
  gamma:
    host: box
    runtime: llama-cpp
    model: gemma
    alias: gemma3-270m
    port: 8102
    ctx_per_slot: 2048
    parallel: 4
    extra_args: ["--temp", "0.6", "--embeddings"]
    env: {{SAMPLER_PROFILE: fast}}
    runtime_env: {{CUDA_VISIBLE_DEVICES: "0"}}
    health:
      path: /v1/models
"""


def test_export_then_import_gives_the_same_fleet(cli: Cli, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for name, size in (
        ("gemma-3-270m-it-Q4_K_M.gguf", 4096),
        ("Qwen3-8B-Q4_K_M-00001-of-00002.gguf", 1000),
        ("Qwen3-8B-Q4_K_M-00002-of-00002.gguf", 2000),
    ):
        (models / name).write_bytes(b"\0" * size)
    original = tmp_path / "fleet.yaml"
    original.write_text(BASE + SERVICES.format(models=models))
    rendered = tmp_path / "rendered"
    result = cli(
        "render", "--target", "llama-swap", "-f", str(original), "--out", str(rendered),
        "--no-check",
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    config = rendered / "llama-swap" / "box" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    assert data["startPort"] == 8100
    assert set(data["models"]) == {"alpha", "beta", "gamma"}
    assert data["groups"]["big"] == {"swap": True, "exclusive": False, "members": ["alpha", "beta"]}
    assert data["models"]["alpha"]["ttl"] == 300
    assert data["models"]["gamma"]["checkEndpoint"] == "/v1/models"
    assert data["models"]["gamma"]["aliases"] == ["gemma3-270m"]
    assert "--port ${PORT}" in data["models"]["gamma"]["cmd"]

    back = tmp_path / "back.yaml"
    back.write_text(BASE)
    result = cli("import", "llama-swap", str(config), "--out", str(back), "--host", "box")
    assert result.code == 0, result.stdout + result.stderr
    for name in ("alpha", "beta", "gamma"):
        assert f"same argv {name}" in result.stdout
    before, after = load_fleet(original).fleet, load_fleet(back).fleet
    assert after.hosts == before.hosts and after.runtimes == before.runtimes
    assert after.groups == before.groups
    assert set(after.services) == set(before.services)
    for name, service in before.services.items():
        again = after.services[name]
        same = again.model_copy(update={"model": service.model}).model_dump()
        assert same == service.model_dump(), name
        assert after.models[again.model or ""] == before.models[service.model or ""]
