"""`inferfleet import systemd UNIT...`: hand-written units that start llama-server.

The unit is written the way operators write them (systemd.service(5):
quoted multi-assignment Environment=, an optional EnvironmentFile=, an
ExecStart= continued over lines with ``\\``, ${VAR} from Environment=).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import CliResult

from inferfleet.fleetfile.loader import load_fleet

Cli = Callable[..., CliResult]

UNIT = """\
[Unit]
Description=Qwen3 coder (llama.cpp)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=llm
Environment="CUDA_VISIBLE_DEVICES=0" "LLAMA_ARG_THREADS=8"
Environment=HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123
Environment=MODELS={models}
EnvironmentFile=-/etc/llm/coder.env
# the server, one flag group per line
ExecStart=/opt/llama.cpp/build/bin/llama-server \\
    -m ${{MODELS}}/Qwen3-8B-Q4_K_M.gguf \\
    --host 127.0.0.1 --port 8081 \\
    -c 65536 -np 2 -fa on \\
    --jinja --temp 0.6
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "Qwen3-8B-Q4_K_M.gguf").write_bytes(b"Q" * 5000)
    return folder


def test_hand_written_unit_becomes_a_systemd_service(
    cli: Cli, tmp_path: Path, models: Path
) -> None:
    unit = tmp_path / "llama-coder.service"
    unit.write_text(UNIT.format(models=models))
    out = tmp_path / "fleet.yaml"
    result = cli("import", "systemd", str(unit), "--out", str(out))
    assert result.code == 0, result.stdout + result.stderr
    service = load_fleet(out).fleet.services["llama-coder"]
    assert service.backend == "systemd"
    assert (service.port, service.ctx_per_slot, service.parallel) == (8081, 32768, 2)
    assert service.unit.user == "llm" and service.unit.restart == "on-failure"
    assert service.unit.restart_sec == 10
    assert service.runtime_env == {"CUDA_VISIBLE_DEVICES": "0", "LLAMA_ARG_THREADS": "8"}
    assert service.env == {"MODELS": str(models)}
    assert service.secrets_env == "/etc/llm/coder.env"
    assert service.extra_args == ["--temp", "0.6"]
    assert "hf_abcdefghijklmnop" not in out.read_text()
    assert "same argv llama-coder" in result.stdout
    assert f"{unit}:2: Description= ([Unit]): not imported" in result.stdout
    assert f"{unit}:10: HF_TOKEN: value not copied" in result.stdout
    shown = cli("show", "llama-coder", "-f", str(out), "--json").document()
    assert shown["argv"][0] == "/opt/llama.cpp/build/bin/llama-server"
    assert shown["argv"][shown["argv"].index("--model") + 1] == f"{models}/Qwen3-8B-Q4_K_M.gguf"


BAD_UNITS = {
    "specifier": ("ExecStart=%h/llama-server -m {m} -c 4096\n", 2, "uses the specifier %h"),
    "shell": (
        "ExecStart=/bin/sh -c 'llama-server -m {m} -c 4096'\n",
        2,
        "starts '/bin/sh', not a server inferfleet runs",
    ),
    "pipe": (
        "ExecStart=/usr/bin/llama-server -m {m} -c 4096 | logger\n",
        2,
        "uses '|', which needs a shell",
    ),
    "unset variable": (
        "ExecStart=/usr/bin/llama-server -m $MODEL -c 4096\n",
        2,
        "uses $MODEL, which the unit does not set",
    ),
    "two starts": (
        "ExecStart=/usr/bin/llama-server -m {m} -c 4096\nExecStart=/usr/bin/true\n",
        3,
        "has 2",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_UNITS))
def test_bad_unit_is_refused_with_its_line(
    cli: Cli, tmp_path: Path, models: Path, case: str
) -> None:
    body, line, message = BAD_UNITS[case]
    unit = tmp_path / "bad.service"
    unit.write_text("[Service]\n" + body.format(m=models / "Qwen3-8B-Q4_K_M.gguf"))
    out = tmp_path / "fleet.yaml"
    out.write_text("# mine\nversion: 1\nhosts:\n  local: {}\n")
    before = out.read_text()
    result = cli("import", "systemd", str(unit), "--out", str(out))
    assert result.code == 2, result.stdout + result.stderr
    assert f"{unit}:{line}:" in result.stderr and message in result.stderr
    assert out.read_text() == before


def test_a_unit_that_is_no_regular_file_or_too_large_is_refused_unread(
    cli: Cli, tmp_path: Path
) -> None:
    # A FIFO would block a plain read forever; an endless file would fill memory.
    fifo = tmp_path / "pipe.service"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.service"
    huge.write_bytes(b"[Service]\n" + b"#" * (256 * 1024))
    out = tmp_path / "fleet.yaml"
    for unit, message in (
        (fifo, f"unit file {fifo} is a FIFO, not a regular file"),
        (huge, f"unit file {huge} has 262,154 bytes; at most 262,144 are read"),
    ):
        result = cli("import", "systemd", str(unit), "--out", str(out))
        assert result.code == 2, result.stdout + result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.stderr
    assert not out.exists()


def test_a_server_open_to_the_network_is_imported_on_loopback(
    cli: Cli, tmp_path: Path, models: Path
) -> None:
    unit = tmp_path / "coder.service"
    unit.write_text(UNIT.format(models=models).replace("--host 127.0.0.1", "--host 0.0.0.0"))
    out = tmp_path / "fleet.yaml"
    result = cli("import", "systemd", str(unit), "--out", str(out))
    assert result.code == 0, result.stdout + result.stderr
    assert load_fleet(out).fleet.services["coder"].bind == "127.0.0.1"
    assert f"{unit}:14: coder: listened on 0.0.0.0; imported on 127.0.0.1" in result.stdout
    assert "--host: 0.0.0.0 -> 127.0.0.1 (kept on loopback" in result.stdout
