"""Memory requests come from the budget (L-27, L-31): the real Gemma 3 270M header, the one
request builder (fleet_request), and only what lives in the node's RAM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.real_model import GEMMA
from kube_fleets import DIGEST

from inferfleet.budget import model_shape, plan
from inferfleet.budget.fleet import fleet_request
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.gguf import inspect
from inferfleet.render.kube.memory import memory_request, memory_requests
from inferfleet.render.kube.workload import service_objects

needs_gemma = pytest.mark.usefixtures("gemma_file")  # assembled once per machine


def _fleet(tmp_path: Path, device: dict[str, Any], **service: Any) -> Path:
    data = {
        "version": 1,
        "hosts": {"box": {"address": "10.0.0.9", "ram": "32GiB", "devices": [device]}},
        "runtimes": {"llama": {"kind": "llama.cpp", "image": f"ghcr.io/ggml/llama{DIGEST}"}},
        "models": {"gemma": {
            # The header is read from the real file here (header_of); the pod would fetch it.
            "source": {"hub": "test/gemma-GGUF", "revision": "0" * 40},
            "files": [{"path": GEMMA.name, "size": GEMMA.stat().st_size}],
        }},
        "services": {"svc": {
            "host": "box", "runtime": "llama", "model": "gemma", "port": 8080,
            "ctx_per_slot": 4096, "parallel": 2, "devices": [device["name"]], **service,
        }},
        "kubernetes": {"tools_image": f"example/inferfleet{DIGEST}", "volume_size": "1GiB"},
    }  # fmt: skip
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _header(_model: str) -> Any:
    return inspect(GEMMA)


def _no_safetensors(model: str) -> str:
    return f"{model} is a GGUF"


@needs_gemma
def test_unified_memory_device_requests_its_whole_budget(tmp_path: Path) -> None:
    """An APU's GTT aperture is system RAM (L-31): the pod asks for the device's bill."""
    apu = {"name": "igpu", "vendor": "amd", "memory": "8GiB", "unified_memory": True}
    loaded = load_fleet(_fleet(tmp_path, apu))
    found = memory_request(
        loaded.fleet, loaded.root, "svc", lambda m: model_shape(_header(m)), _no_safetensors
    )
    budget = plan(
        fleet_request(loaded.fleet, loaded.root, "svc", lambda m: model_shape(_header(m)))
    )
    # The token embeddings stay in host memory on every backend; the rest is on the APU.
    assert found == budget.device("igpu").used + budget.device("host").used
    assert isinstance(found, int) and found > GEMMA.stat().st_size


@needs_gemma
def test_discrete_gpu_requests_only_what_stays_in_ram(tmp_path: Path) -> None:
    gpu = {"name": "card", "vendor": "nvidia", "memory": "8GiB"}
    loaded = load_fleet(_fleet(tmp_path, gpu))
    sized, unsized = memory_requests(loaded.fleet, loaded.root, _header, _no_safetensors)
    budget = plan(
        fleet_request(loaded.fleet, loaded.root, "svc", lambda m: model_shape(_header(m)))
    )
    assert unsized == {} and sized["svc"] == budget.device("host").used  # token embeddings
    embeddings_only = sized["svc"]

    overrides = [{"pattern": r"ffn_.*", "device": "CPU"}]
    loaded = load_fleet(_fleet(tmp_path, gpu, tensor_overrides=overrides))
    sized, unsized = memory_requests(loaded.fleet, loaded.root, _header, _no_safetensors)
    budget = plan(
        fleet_request(loaded.fleet, loaded.root, "svc", lambda m: model_shape(_header(m)))
    )
    assert sized["svc"] == budget.device("host").used
    assert embeddings_only < sized["svc"] < sum(d.used for d in budget.devices)


@needs_gemma
def test_the_request_lands_on_the_server_container(tmp_path: Path) -> None:
    apu = {"name": "igpu", "vendor": "amd", "memory": "8GiB", "unified_memory": True}
    loaded = load_fleet(_fleet(tmp_path, apu))
    sized, _ = memory_requests(loaded.fleet, loaded.root, _header, _no_safetensors)
    objs = service_objects(loaded.fleet, loaded.root, "svc", "ns", sized)
    server = next(o for o in objs if o["kind"] == "StatefulSet")["spec"]["template"]["spec"][
        "containers"
    ][0]
    mib = -(-sized["svc"] // (1 << 20))
    assert server["resources"]["requests"]["memory"] == f"{mib}Mi"
    assert "memory" not in server["resources"]["limits"]  # no limit: mmap pages (L-23)
