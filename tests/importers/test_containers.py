"""`inferfleet import quadlet FILE...` and `import compose FILE`: containerised llama-server.

A Quadlet `.container` written as podman-systemd.unit(5) writes one, and a
compose file as the compose specification writes one (GPUs through
`deploy.resources.reservations.devices`, a web UI beside the server). The
model path inside the container is mapped through the volume to the real
file on disk, whose size the model records.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import CliResult

from inferfleet.fleetfile.loader import load_fleet

Cli = Callable[..., CliResult]
DIGEST = "sha256:" + "0123456789abcdef" * 4

BASE = """\
# GPU box, declared by hand
version: 1
hosts:
  gpu1:
    address: 10.0.0.5
    devices:
      - {name: gpu0, vendor: nvidia, memory: 24GiB}
"""


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "gemma-3-270m-it-Q4_K_M.gguf").write_bytes(b"G" * 4321)
    return folder


def test_quadlet_container_becomes_a_quadlet_service(
    cli: Cli, tmp_path: Path, models: Path
) -> None:
    unit = tmp_path / "llama.container"
    unit.write_text(
        f"""\
[Unit]
Description=llama.cpp server

[Container]
Image=ghcr.io/ggml-org/llama.cpp:server-cuda@{DIGEST}
ContainerName=llama
Volume={models}:/models:ro,z
PublishPort=127.0.0.1:8090:8080
AddDevice=nvidia.com/gpu=all
Environment=LLAMA_ARG_THREADS=8
Exec=-m /models/gemma-3-270m-it-Q4_K_M.gguf --host 0.0.0.0 --port 8080 -c 8192 -np 2 -ngl 99

[Service]
Restart=always

[Install]
WantedBy=default.target
"""
    )
    out = tmp_path / "fleet.yaml"
    out.write_text(BASE)
    result = cli("import", "quadlet", str(unit), "-f", str(out), "--host", "gpu1")
    assert result.code == 0, result.stdout + result.stderr
    fleet = load_fleet(out).fleet
    service = fleet.services["llama"]
    assert service.backend == "quadlet"
    assert (service.port, service.container.port) == (8090, 8080)
    assert service.container.devices == ["nvidia.com/gpu=all"]
    assert service.devices == ["gpu0"]
    assert (
        fleet.runtimes[service.runtime or ""].image
        == f"ghcr.io/ggml-org/llama.cpp:server-cuda@{DIGEST}"
    )
    model = fleet.models[service.model or ""]
    assert [(f.path, f.size) for f in model.files] == [("gemma-3-270m-it-Q4_K_M.gguf", 4321)]
    assert "same argv llama" in result.stdout
    assert "the fleet mounts the file's folder" in result.stdout
    assert f"{unit}:14: Restart= ([Service]): not imported" in result.stdout
    assert "# GPU box, declared by hand" in out.read_text()


COMPOSE = """\
services:
  llama:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    command: >
      -m /models/gemma-3-270m-it-Q4_K_M.gguf
      --host 0.0.0.0 --port 8080
      -c 8192 -np 2 -ngl 99
    ports:
      - "127.0.0.1:8080:8080"
    volumes:
      - {models}:/models:ro
    environment:
      LLAMA_ARG_THREADS: "8"
      HF_TOKEN: hf_abcdefghijklmnopqrstuvwxyz0123
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
    restart: unless-stopped
  webui:
    image: ghcr.io/open-webui/open-webui:main
    ports: ["3000:8080"]
"""


def test_compose_file_llama_server_is_imported_and_the_ui_listed(
    cli: Cli, tmp_path: Path, models: Path
) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE.format(models=models))
    out = tmp_path / "fleet.yaml"
    out.write_text(BASE)
    result = cli("import", "compose", str(compose), "--out", str(out), "--host", "gpu1")
    assert result.code == 0, result.stdout + result.stderr
    fleet = load_fleet(out).fleet
    assert set(fleet.services) == {"llama"}
    service = fleet.services["llama"]
    assert service.container.devices == ["nvidia.com/gpu=all"]
    assert (service.port, service.ctx_per_slot, service.parallel) == (8080, 4096, 2)
    assert service.secrets_env is not None
    assert "hf_abcdefghijklmnop" not in out.read_text()
    assert "services.webui: image ghcr.io/open-webui/open-webui:main is not a llama-server" in (
        result.stdout
    )
    assert "is not pinned by digest (L-42)" in result.stdout
    assert f"{compose}:22: services.llama.restart: not imported" in result.stdout


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--port 8080", "--port ${{PORT}}"), "uses ${PORT}, which compose takes from the shell"),
        (("127.0.0.1:8080:8080", "127.0.0.1:8080:9999"), "port 8080 is not published"),
        (("{models}:/models:ro", "{models}:/elsewhere:ro"), "is in no volume of the container"),
    ],
)
def test_bad_compose_is_refused_and_nothing_written(
    cli: Cli, tmp_path: Path, models: Path, change: tuple[str, str], message: str
) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE.replace(*change).format(models=models))
    out = tmp_path / "fleet.yaml"
    out.write_text(BASE)
    result = cli("import", "compose", str(compose), "--out", str(out), "--host", "gpu1")
    assert result.code == 2, result.stdout + result.stderr
    assert message in result.stderr and f"{compose}:" in result.stderr
    assert out.read_text() == BASE


VLLM_COMPOSE = """\
services:
  vllm:
    image: vllm/vllm-openai@{digest}
    command: ["/models/qwen3-8b", "--served-model-name", "qwen3-8b", "--host", "0.0.0.0",
              "--port", "8000", "--max-model-len", "32768", "--max-num-seqs", "16",
              "--gpu-memory-utilization", "0.9", "--enable-auto-tool-choice",
              "--tool-call-parser", "hermes", "--enable-prefix-caching"]
    ports: ["127.0.0.1:8000:8000"]
    volumes: ["{models}:/models:ro"]
    ipc: host
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["0", "1"]
              capabilities: [gpu]
"""


def test_compose_vllm_server_with_a_model_folder(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "models" / "qwen3-8b"
    folder.mkdir(parents=True)
    sizes = {"config.json": 700, "model-00001-of-00002.safetensors": 3000,
             "model-00002-of-00002.safetensors": 2000, "tokenizer.json": 900}  # fmt: skip
    for name, size in sizes.items():
        (folder / name).write_bytes(b"\0" * size)
    compose = tmp_path / "compose.yaml"
    compose.write_text(VLLM_COMPOSE.format(digest=DIGEST, models=folder.parent))
    out = tmp_path / "fleet.yaml"
    out.write_text(BASE)
    result = cli("import", "compose", str(compose), "--out", str(out), "--host", "gpu1")
    assert result.code == 0, result.stdout + result.stderr
    fleet = load_fleet(out).fleet
    service = fleet.services["vllm"]
    assert fleet.runtimes[service.runtime or ""].kind == "vllm"
    assert (service.ctx_per_slot, service.parallel, service.port) == (32768, 16, 8000)
    assert (service.gpu_memory_utilization, service.tool_parser) == (0.9, "hermes")
    assert service.client.tools and service.alias == "qwen3-8b"
    assert service.extra_args == ["--enable-prefix-caching"]
    assert service.container.devices == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]
    model = fleet.models[service.model or ""]
    assert {f.path: f.size for f in model.files} == sizes
    assert "same argv vllm" in result.stdout
    assert f"{compose}:10: services.vllm.ipc: not imported" in result.stdout


def test_compose_sglang_server_run_by_its_command(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "models" / "qwen3-4b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(b"{}" * 100)
    (folder / "model.safetensors").write_bytes(b"\0" * 4000)
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        f"""\
services:
  sglang:
    image: lmsysorg/sglang@{DIGEST}
    command: >
      python3 -m sglang.launch_server --model-path /models/qwen3-4b
      --host 0.0.0.0 --port 30000 --context-length 32768 --max-running-requests 8
      --mem-fraction-static 0.8 --tool-call-parser qwen25 --enable-torch-compile
    ports: ["127.0.0.1:30000:30000"]
    volumes: ["{folder.parent}:/models:ro"]
    shm_size: 32g
"""
    )
    out = tmp_path / "fleet.yaml"
    result = cli("import", "compose", str(compose), "--out", str(out))
    assert result.code == 0, result.stdout + result.stderr
    fleet = load_fleet(out).fleet
    service = fleet.services["sglang"]
    assert fleet.runtimes[service.runtime or ""].kind == "sglang"
    assert (service.ctx_per_slot, service.parallel, service.port) == (32768, 8, 30000)
    assert service.gpu_memory_utilization == 0.8 and service.tool_parser == "qwen25"
    assert service.container.shm_size == 32 * 1024**3
    assert service.extra_args == ["--enable-torch-compile"]
    assert "same argv sglang" in result.stdout
    assert "--enable-metrics: (absent) -> (set)" in " ".join(result.stdout.split())


def test_sglang_without_slots_is_refused(cli: Cli, tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  s:\n    image: lmsysorg/sglang\n"
        "    command: python3 -m sglang.launch_server --model-path org/m --context-length 8192\n"
    )
    result = cli("import", "compose", str(compose), "--out", str(tmp_path / "fleet.yaml"))
    assert result.code == 2
    assert "no --max-running-requests: SGLang picks the slots itself" in result.stderr


def test_compose_vllm_api_server_module(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "models" / "qwen3-8b"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        VLLM_COMPOSE.format(digest=DIGEST, models=folder.parent)
        .replace('"/models/qwen3-8b", ', '"--model", "/models/qwen3-8b", ')
        .replace(
            "    ipc: host\n",
            '    entrypoint: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n',
        )
    )
    out = tmp_path / "fleet.yaml"
    out.write_text(BASE)
    result = cli("import", "compose", str(compose), "--out", str(out), "--host", "gpu1")
    assert result.code == 0, result.stdout + result.stderr
    said = " ".join(result.stdout.split())
    assert "same argv vllm" in said
    assert "vLLM's API server module and `vllm serve` start one server" in said
