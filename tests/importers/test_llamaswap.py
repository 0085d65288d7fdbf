"""`inferfleet import llama-swap`: llama-swap configs written as its own docs write them.

The configs use llama-swap's documented keys (config.example.yaml): global
and per-model macros (one using ${PORT}), block-scalar commands with comment
lines and backslash continuations, aliases, ttl, env, checkEndpoint,
unlisted, groups with swap/exclusive. The model files are real files on disk
(their sizes are what the import records); no server runs here: the check is
that the fleet's own launch pipeline (`show`) renders the original argv.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import CliResult

from inferfleet.fleetfile.loader import load_fleet

Cli = Callable[..., CliResult]


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "gemma-3-270m-it-Q4_K_M.gguf").write_bytes(b"G" * 12345)
    (folder / "Qwen3-8B-Q4_K_M-00001-of-00002.gguf").write_bytes(b"Q" * 2222)
    (folder / "Qwen3-8B-Q4_K_M-00002-of-00002.gguf").write_bytes(b"Q" * 3333)
    (folder / "mmproj-gemma.gguf").write_bytes(b"P" * 77)
    return folder


def documented_config(models: Path) -> str:
    return f"""\
# llama-swap config, written the way config.example.yaml writes one
healthCheckTimeout: 500
logLevel: info
startPort: 10001

macros:
  "latest-llama": >
    /usr/local/bin/llama-server
    --port ${{PORT}}
  "models": "{models}"
  "ctx": 8192

models:
  "gemma":
    # a comment above the command
    cmd: |
      ${{latest-llama}}
      # --verbose
      -m ${{models}}/gemma-3-270m-it-Q4_K_M.gguf
      --mmproj ${{models}}/mmproj-gemma.gguf
      -c ${{ctx}} -np 2
      --temp 0.7 \\
      --top-k 40
      --api-key sk-abcdefghijklmnopqrstuvwxyz123456
    aliases:
      - gemma-small
      - gpt-4o-mini
    ttl: 60
    env:
      - "CUDA_VISIBLE_DEVICES=0"
      - "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123"
      - "MY_TUNABLE=1"
    checkEndpoint: /health
  "qwen":
    macros:
      "ctx": 4096
    proxy: http://127.0.0.1:9999
    cmd: >
      /usr/local/bin/llama-server --port 9999
      -m ${{models}}/Qwen3-8B-Q4_K_M-00001-of-00002.gguf
      -c ${{ctx}} --metrics -fa on -ctk q8_0 -ctv q8_0 --jinja
    unlisted: true
"""


def test_documented_config_becomes_services_with_the_same_argv(
    cli: Cli, tmp_path: Path, models: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(documented_config(models))
    out = tmp_path / "fleet.yaml"
    result = cli("import", "llama-swap", str(config), "--out", str(out))
    assert result.code == 0, result.stdout + result.stderr
    fleet = load_fleet(out).fleet
    gemma = fleet.services["gemma"]
    # ${PORT}: llama-swap's first port from startPort; -c 8192 over 2 slots (L-25).
    assert (gemma.port, gemma.ctx_per_slot, gemma.parallel) == (10001, 4096, 2)
    assert gemma.alias is None  # the service name, llama-swap's model id, is its alias
    assert gemma.extra_args == ["--temp", "0.7", "--top-k", "40"]
    assert gemma.runtime_env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert gemma.env == {"MY_TUNABLE": "1"}
    assert gemma.secrets_env is not None
    assert gemma.health.path == "/health" and gemma.health.timeout == 500
    assert gemma.mmproj == "mmproj-gemma.gguf"
    model = fleet.models[gemma.model or ""]
    assert [(f.path, f.size) for f in model.files] == [
        ("gemma-3-270m-it-Q4_K_M.gguf", 12345),
        ("mmproj-gemma.gguf", 77),
    ]
    qwen = fleet.services["qwen"]
    assert (qwen.port, qwen.ctx_per_slot, qwen.flash_attn, qwen.jinja) == (9999, 4096, "on", True)
    assert (qwen.kv_cache.k, qwen.kv_cache.v) == ("q8_0", "q8_0")
    split = fleet.models[qwen.model or ""]
    assert [(f.path, f.size) for f in split.files] == [
        ("Qwen3-8B-Q4_K_M-00001-of-00002.gguf", 2222),
        ("Qwen3-8B-Q4_K_M-00002-of-00002.gguf", 3333),
    ]
    text = out.read_text()
    # Secrets are referenced, never copied (L-06, L-55), nor printed.
    for secret in ("sk-abcdefghijklmnop", "hf_abcdefghijklmnop"):
        assert secret not in text
        assert secret not in result.stdout
    # Per service, the verdict of the argv comparison; what has no equivalent, with its line.
    assert "same argv gemma" in result.stdout and "same argv qwen" in result.stdout
    assert "(L-56)" in result.stdout and "(L-25)" in result.stdout
    lines = result.stdout
    assert f"{config}:3: logLevel: no equivalent" in lines
    assert f"{config}:26:" in lines and "'gemma-small' has no equivalent" in lines
    assert f"{config}:42: models.qwen.unlisted: no equivalent" in lines
    assert "ttl 60s has no equivalent outside a swap group" in lines
    # `show` prints exactly the argv the comparison used.
    shown = cli("show", "gemma", "-f", str(out), "--json")
    argv = shown.document()["argv"]
    assert argv[:3] == [
        "/usr/local/bin/llama-server",
        "--model",
        f"{models}/gemma-3-270m-it-Q4_K_M.gguf",
    ]
    assert "--port" in argv and argv[argv.index("--port") + 1] == "10001"
    assert argv[argv.index("--mmproj") + 1] == f"{models}/mmproj-gemma.gguf"


EXISTING = """\
# My fleet: written by hand; these comments must survive an import.
version: 1

hosts:
  gpu1:
    address: 10.0.0.5
    devices:
      - name: gpu0      # the 3090
        vendor: nvidia
        memory: 24GiB

runtimes:
  llama-cpp:
    kind: llama.cpp
    binary: /usr/local/bin/llama-server   # pinned by hand

models: {}
services: {}
"""


def test_import_into_an_existing_fleet_keeps_comments_and_maps_a_swap_group(
    cli: Cli, tmp_path: Path, models: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""\
models:
  "coder":
    cmd: >
      /usr/local/bin/llama-server --port ${{PORT}}
      -m {models}/gemma-3-270m-it-Q4_K_M.gguf -ngl 99 -c 4096 -fa on
    ttl: 300
  "chat":
    cmd: |
      /usr/local/bin/llama-server --port ${{PORT}}
        -m {models}/Qwen3-8B-Q4_K_M-00001-of-00002.gguf -ngl 999 -c 8192
    ttl: 300
  "embed":
    cmd: >
      /usr/local/bin/llama-server --port ${{PORT}}
      -m {models}/gemma-3-270m-it-Q4_K_M.gguf -c 2048 --embeddings
groups:
  "big":
    swap: true
    exclusive: true
    members: ["coder", "chat"]
"""
    )
    out = tmp_path / "fleet.yaml"
    out.write_text(EXISTING)
    result = cli("import", "llama-swap", str(config), "--out", str(out), "--host", "gpu1")
    assert result.code == 0, result.stdout + result.stderr
    text = out.read_text()
    for comment in ("# My fleet: written by hand", "# the 3090", "# pinned by hand"):
        assert comment in text
    fleet = load_fleet(out).fleet
    # The existing runtime with the same binary is reused; -ngl 99 puts every layer on the
    # host's GPU; the two models share one file entry.
    assert {s.runtime for s in fleet.services.values()} == {"llama-cpp"}
    assert fleet.services["coder"].devices == ["gpu0"]
    assert fleet.services["coder"].model == fleet.services["embed"].model
    # A swapping group of llama.cpp members is a fleet swap group: one at a time, ttl kept.
    assert fleet.groups["big"].max_loaded == 1
    assert fleet.groups["big"].idle_unload == 300
    assert {n for n, s in fleet.services.items() if s.group == "big"} == {"coder", "chat"}
    assert fleet.services["embed"].extra_args == ["--embeddings"]
    assert "groups.big.exclusive: no equivalent" in result.stdout
    assert "-ngl 999" in result.stdout or "every layer" in result.stdout
    # A second import of the same config clashes by name: refused, file untouched.
    again = cli("import", "llama-swap", str(config), "--out", str(out), "--host", "gpu1")
    assert again.code == 2
    assert "service 'coder' is already in the fleet file" in again.stderr
    assert out.read_text() == text


BAD_CONFIGS = {
    "unknown key": (
        """models:\n  m:\n    cmd: llama-server -m {m} -c 4096\n    cmdd: oops\n""",
        4,
        "unknown model 'm' key 'cmdd'",
    ),
    "undefined macro": (
        """models:\n  m:\n    cmd: llama-server -m {m} -c ${{ctx}}\n""",
        3,
        "macro ${{ctx}} not defined",
    ),
    "pipe": (
        """models:\n  m:\n    cmd: |\n      llama-server -m {m}\n      -c 4096 | tee /tmp/log\n""",
        5,
        "uses '|', which needs a shell",
    ),
    "command substitution": (
        """models:\n  m:\n    cmd: llama-server -m $(ls {m}) -c 4096\n""",
        3,
        "uses '$(', which needs a shell",
    ),
    "and-and": (
        """models:\n  m:\n    cmd: cd /tmp && llama-server -m {m} -c 4096\n""",
        3,
        "uses '&&'",
    ),
    "unknown runtime": (
        """models:\n  m:\n    cmd: docker run --rm ghcr.io/ggml-org/llama.cpp:server -m {m}\n""",
        3,
        "starts 'docker', not a server inferfleet runs",
    ),
    "duplicate alias": (
        """models:\n  a:\n    cmd: llama-server -m {m} -c 4096\n    aliases: [b]\n"""
        """  b:\n    cmd: llama-server -m {m} -c 4096\n""",
        5,
        "model name 'b' is already used at",
    ),
    "partial offload": (
        """models:\n  m:\n    cmd: llama-server -m {m} -c 4096 -ngl 20\n""",
        3,
        "-ngl 20 offloads part of the model",
    ),
    "no window": (
        """models:\n  m:\n    cmd: llama-server -m {m}\n""",
        3,
        "no -c",
    ),
    "server not on the proxy's port": (
        """models:\n  m:\n    cmd: llama-server -m {m} -c 4096\n""",
        3,
        "the server listens on 8080 but proxy sends to 5800",
    ),
    "flag without its value": (
        """models:\n  m:\n    cmd: llama-server --port ${{PORT}} -m {m} -fa -c 4096\n""",
        3,
        "-fa takes a value, but -c follows it",
    ),
    "duplicate port": (
        """models:\n  a:\n    proxy: http://127.0.0.1:9000\n"""
        """    cmd: llama-server --port 9000 -m {m} -c 4096\n"""
        """  b:\n    proxy: http://127.0.0.1:9000\n"""
        """    cmd: llama-server --port 9000 -m {m} -c 4096\n""",
        7,
        "b listens on port 9000 of host gpu1, as a does",
    ),
    "reserved macro": (
        """macros:\n  PORT: 1234\nmodels:\n  m:\n    cmd: llama-server -m {m} -c 4096\n""",
        2,
        "macro PORT is reserved",
    ),
    "env macro": (
        """models:\n  m:\n    cmd: llama-server -m ${{env.HOME}}/x.gguf -c 4096\n""",
        3,
        "environment macros resolve where llama-swap starts",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_refused_with_its_line_and_nothing_written(
    cli: Cli, tmp_path: Path, models: Path, case: str
) -> None:
    template, line, message = BAD_CONFIGS[case]
    config = tmp_path / "config.yaml"
    config.write_text(template.format(m=models / "gemma-3-270m-it-Q4_K_M.gguf"))
    out = tmp_path / "fleet.yaml"
    out.write_text(EXISTING)
    result = cli("import", "llama-swap", str(config), "--out", str(out), "--host", "gpu1")
    assert result.code == 2, result.stdout + result.stderr
    assert f"{config}:{line}:" in result.stderr
    assert message.replace("{{", "{").replace("}}", "}") in result.stderr
    assert "Traceback" not in result.stderr
    assert out.read_text() == EXISTING
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "fleet.yaml", "models"]


def test_a_new_fleet_file_is_not_created_on_error(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("models:\n  m:\n    cmd: llama-server -m /nowhere/x.gguf -c 4096\n")
    out = tmp_path / "fleet.yaml"
    result = cli("import", "llama-swap", str(config), "--out", str(out))
    assert result.code == 2
    assert "cannot read the size of model file /nowhere/x.gguf" in result.stderr
    assert not out.exists()


def test_gpu_layers_need_declared_devices(cli: Cli, tmp_path: Path, models: Path) -> None:
    config = tmp_path / "config.yaml"
    model = models / "gemma-3-270m-it-Q4_K_M.gguf"
    config.write_text(f"models:\n  m:\n    cmd: llama-server -m {model} -c 4096 -ngl 99\n")
    out = tmp_path / "fleet.yaml"
    result = cli("import", "llama-swap", str(config), "--out", str(out))
    assert result.code == 2
    assert "host 'local' declares no GPU devices" in result.stderr
    assert "hosts.local.devices" in result.stderr
    assert not out.exists()
