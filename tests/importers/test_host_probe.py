"""The `import host` probe: its output parsed as data, and the probe run by a real sh here."""

from __future__ import annotations

import base64
import socket

from inferfleet.importers.commandline import identify
from inferfleet.importers.host import (
    PROBE,
    alias_of,
    model_dirs,
    model_folder,
    parse_probe,
    parse_sizes,
    port_of,
    server_argv,
    unit_of,
)
from inferfleet.io import process


def test_probe_output_is_parsed() -> None:
    argv = ["/opt/llama/llama-server", "-m", "/srv/m.gguf", "--port", "8181", "-c", "4096"]
    cmdline = base64.b64encode(("\0".join(argv) + "\0").encode()).decode()
    text = (
        "pid 4242\n"
        f"argv {cmdline}\n"
        "env PATH HOME LLAMA_ARG_THREADS HF_TOKEN \n"
        "cgroup 0::/system.slice/llama-coder.service\n"
        "pid 17\n"
        "argv not-base64!\n"
        "listen 1FF5 0016 zz\n"
    )
    probe = parse_probe(text)
    first, second = probe.processes
    assert (first.pid, first.argv) == (4242, argv)
    assert first.env_names == ["PATH", "HOME", "LLAMA_ARG_THREADS", "HF_TOKEN"]
    assert unit_of(first.cgroup) == ("llama-coder.service", "system")
    assert second.argv == []  # a damaged line is skipped, not trusted
    assert probe.listening == {8181, 22}
    assert port_of(argv) == 8181 and port_of(argv[:3]) == 8080
    user = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/llm.service"
    assert unit_of(user) == ("llm.service", "user")
    assert unit_of("0::/user.slice/user-1000.slice/session-3.scope") is None
    assert parse_sizes("123 /srv/m.gguf\nbad line\n9 /srv/a b.gguf\n") == {
        "/srv/m.gguf": 123,
        "/srv/a b.gguf": 9,
    }


def test_the_probe_runs_in_sh_and_sees_a_listening_port() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        done = process.run(["sh", "-c", PROBE], timeout=30)
    probe = parse_probe(done.stdout)
    assert port in probe.listening
    # llama-server, or vLLM/SGLang (a console script is read as the operator ran it)
    assert all(identify(p.argv) is not None for p in probe.processes)


def test_each_runtime_is_read_with_its_own_flags() -> None:
    """Port, name and model folder per runtime; a console script as /proc shows it is read as
    the operator ran it (its shebang's Python dropped)."""
    script = ["/opt/vllm/bin/python3", "/opt/vllm/bin/vllm", "serve", "/srv/qwen",
              "--served-model-name", "qwen", "--port=8001"]  # fmt: skip
    assert server_argv(script) == script[1:]
    assert port_of(script[1:]) == 8001 and alias_of(script[1:]) == "qwen"
    assert model_folder(script[1:]) == "/srv/qwen" and model_dirs(script[1:]) == []
    sglang = ["/opt/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/srv/s"]
    assert port_of(sglang) == 30000 and model_folder(sglang) == "/srv/s"
    llama = ["/opt/llama/llama-server", "-a", "coder", "-m", "/srv/m.gguf"]
    assert alias_of(llama) == "coder" and port_of(llama) == 8080
    assert model_dirs(llama) == ["/srv"] and model_folder(llama) is None
    hub = ["/opt/vllm/bin/vllm", "serve", "Qwen/Qwen3-8B"]
    assert model_folder(hub) is None  # a Hub id: nothing to list on the host
