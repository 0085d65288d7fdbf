"""``inferfleet check`` rule device-memory-fit, through the CLI, on the real Gemma 3 270M header.

Every case is an incident fleet that trips the rule and the fixed fleet that
passes. The numbers in the finding are ``inferfleet budget``'s own (L-27): the
test reads the per-device bill from ``budget --json`` and checks that the
finding adds exactly those, so check and budget cannot drift apart.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.real_model import GEMMA

MIB = 1 << 20
GIB = 1 << 30
needs_gemma = pytest.mark.usefixtures("gemma_file")  # assembled once per machine
DIGEST = "@sha256:" + "a" * 64
# vllm-kv-capacity's incident and fix: tests/budget/test_budget_vllm.py (a real safetensors model).
FIT_RULES = {"device-memory-fit", "vllm-kv-capacity"}


def chat(port: int, device: str, ctx: int = 8192, parallel: int = 1) -> dict[str, Any]:
    return {
        "host": "gpu", "runtime": "lcpp", "model": "gemma", "port": port,
        "ctx_per_slot": ctx, "parallel": parallel, "devices": [device],
        "client": {"chat": False},  # a base model: completions only (L-19)
    }  # fmt: skip


def fleet(
    devices: list[dict[str, Any]], services: dict[str, Any], *, ram: str = "64GiB"
) -> dict[str, Any]:
    return {
        "version": 1,
        "hosts": {"gpu": {"address": "10.0.0.5", "ram": ram, "devices": devices}},
        "runtimes": {
            "lcpp": {
                "kind": "llama.cpp",
                "binary": "/opt/llama/llama-server",
                "version": "b11434",
                "sha256": "0" * 64,
            },  # pinned (L-42)
            "vllm": {"kind": "vllm", "image": "docker.io/vllm/vllm-openai" + DIGEST},
        },
        "models": {
            "gemma": {
                "source": {"path": str(GEMMA.parent)},
                "files": [{"path": GEMMA.name, "size": GEMMA.stat().st_size}],
            },
            "absent": {
                "source": {"path": "/nonexistent/absent"},
                "files": [{"path": "absent.gguf", "size": 1}],
            },
            "hf": {
                "source": {"path": "/nonexistent/hf"},
                "files": [{"path": "config.json", "size": 1}],
            },
        },
        "services": services,
    }


def nvidia(name: str, memory: str) -> dict[str, Any]:
    return {"name": name, "vendor": "nvidia", "memory": memory}


def write(tmp_path: Path, data: dict[str, Any], name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def fit_findings(cli: Any, path: Path) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    result = cli("check", str(path), "--json")
    doc = json.loads(result.stdout)
    hits = [f for f in doc["findings"] if f["rule"] == "device-memory-fit"]
    # This rule's own skips: the fleets' path models are not on this machine, so
    # the declared-files rule skips them (and a binary runtime's flag list too).
    doc["skipped"] = [s for s in doc["skipped"] if s["rule"] == "device-memory-fit"]
    return result.code, hits, doc


def bill(cli: Any, path: Path, service: str, device: str) -> dict[str, Any]:
    """``inferfleet budget SERVICE --json``'s bill of one device."""
    result = cli("budget", service, "-f", str(path), "--json")
    doc = json.loads(result.stdout)
    (entry,) = doc["services"]
    found: dict[str, Any] = next(d for d in entry["devices"] if d["name"] == device)
    return found


def mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB"


pytestmark = needs_gemma


def test_one_service_too_big_for_its_device(cli: Any, tmp_path: Path) -> None:
    """L-27: a 1 GiB card, 2 x 32768 tokens of KV and the 1 GiB headroom do not fit."""
    incident = fleet([nvidia("g0", "1GiB")], {"chat": chat(8080, "g0", 32768, 2)})
    path = write(tmp_path, incident)
    code, (hit,), _ = fit_findings(cli, path)
    assert code == 1
    device = bill(cli, path, "chat", "g0")
    over = device["used"] + device["headroom"] - GIB
    assert device["margin"] == -over  # budget says the same
    assert hit["field"] == "hosts.gpu.devices[0].memory"
    assert path.read_text().splitlines()[hit["line"] - 1].strip() == "memory: 1GiB"
    assert hit["service"] == "chat" and hit["lesson"] == "L-27"
    message = hit["message"]
    assert "device 'g0' of host 'gpu' has 1,024 MiB" in message
    assert f"chat {mib(device['used'])} (llama.cpp budget); headroom 1,024 MiB" in message
    assert message.endswith(f"{math.ceil(over / MIB):,} MiB over")
    assert "`inferfleet budget chat --solve`" in hit["hint"]

    human = cli("check", str(path))
    assert "error L-27 device-memory-fit hosts.gpu.devices[0].memory" in human.stdout
    assert "fix: `inferfleet budget chat --solve` finds the largest ctx_per_slot" in human.stdout

    # 1 GiB is all headroom (llama.cpp's --fit keeps 1 GiB free): a 2 GiB card holds it.
    fixed = write(tmp_path, fleet([nvidia("g0", "2GiB")], {"chat": chat(8080, "g0", 32768, 2)}))
    code, hits, doc = fit_findings(cli, fixed)
    assert hits == [] and code == 0 and doc["skipped"] == []


def test_services_that_fit_alone_do_not_fit_together(cli: Any, tmp_path: Path) -> None:
    """Two llama.cpp services on one 1.5 GiB device: each fits, both need more; the
    headroom is kept once per device, not once per service."""
    services = {"a": chat(8080, "g0", 32768, 2), "b": chat(8081, "g0", 32768, 2)}
    alone = write(tmp_path, fleet([nvidia("g0", "1536MiB")], {"a": services["a"]}), "alone.yaml")
    assert fit_findings(cli, alone)[1] == []
    path = write(tmp_path, fleet([nvidia("g0", "1536MiB")], services))
    code, (hit,), _ = fit_findings(cli, path)
    assert code == 1 and hit["service"] is None  # two services: the device is the subject
    used = bill(cli, path, "a", "g0")["used"]
    over = 2 * used + GIB - 1536 * MIB
    message = hit["message"]
    assert f"need {mib(2 * used + GIB)}: a {mib(used)} (llama.cpp budget); b {mib(used)}" in message
    assert message.endswith(f"{math.ceil(over / MIB):,} MiB over")
    assert "`inferfleet budget a --solve` and `inferfleet budget b --solve`" in hit["hint"]

    services["b"] = chat(8081, "g1", 32768, 2)
    devices = [nvidia("g0", "1536MiB"), nvidia("g1", "1536MiB")]
    code, hits, _ = fit_findings(cli, write(tmp_path, fleet(devices, services)))
    assert hits == [] and code == 0


def test_a_vllm_share_counts_against_the_device(cli: Any, tmp_path: Path) -> None:
    """L-32: vLLM claims gpu_memory_utilization x the device at start; a llama.cpp
    service beside it gets only the rest."""
    serve = {"host": "gpu", "runtime": "vllm", "model": "hf", "port": 8000,
             "ctx_per_slot": 8192, "devices": ["g0"], "gpu_memory_utilization": 0.95,
             "backend": "quadlet"}  # fmt: skip
    services = {"chat": chat(8080, "g0"), "serve": serve}
    path = write(tmp_path, fleet([nvidia("g0", "24GiB")], services))
    code, (hit,), _ = fit_findings(cli, path)
    assert code == 1
    share = int(24 * GIB * 0.95)
    used = bill(cli, path, "chat", "g0")["used"]
    assert f"serve {mib(share)} (vllm share 0.95)" in hit["message"]
    over = used + share + GIB - 24 * GIB
    assert hit["message"].endswith(f"{math.ceil(over / MIB):,} MiB over")
    assert "lower gpu_memory_utilization of the vLLM/SGLang service (L-32)" in hit["hint"]

    serve["gpu_memory_utilization"] = 0.9
    code, hits, _ = fit_findings(cli, write(tmp_path, fleet([nvidia("g0", "24GiB")], services)))
    assert hits == [] and code == 0


def test_an_engine_alone_at_its_cap_fits(cli: Any, tmp_path: Path) -> None:
    """L-32: 0.98 worked; an engine's share leaves its own slack, no headroom on top."""
    serve = {"host": "gpu", "runtime": "vllm", "model": "hf", "port": 8000,
             "ctx_per_slot": 8192, "devices": ["g0"], "gpu_memory_utilization": 0.98,
             "backend": "quadlet"}  # fmt: skip
    code, hits, _ = fit_findings(
        cli, write(tmp_path, fleet([nvidia("g0", "24GiB")], {"serve": serve}))
    )
    assert hits == [] and code == 0


def test_an_apu_shares_system_ram_with_the_host(cli: Any, tmp_path: Path) -> None:
    """L-31: the GTT aperture is system RAM; the APU's bills and the host's share it."""
    apu = {"name": "igpu", "vendor": "amd", "memory": "2GiB", "unified_memory": True}
    services = {"a": chat(8080, "igpu", 32768, 2), "b": chat(8081, "igpu", 32768, 2)}
    path = write(tmp_path, fleet([apu], services, ram="2GiB"))
    code, hits, _ = fit_findings(cli, path)
    assert code == 1
    (hit,) = hits  # the aperture holds both; the RAM behind it does not
    assert hit["field"] == "hosts.gpu.ram"
    gpu = bill(cli, path, "a", "igpu")["used"]
    host = bill(cli, path, "a", "host")["used"]
    assert (
        "the system RAM of host 'gpu' (unified-memory GTT and host memory, L-31)"
        in (hit["message"])
    )
    assert f"a {mib(gpu + host)} (llama.cpp budget)" in hit["message"]
    over = 2 * (gpu + host) + GIB - 2 * GIB
    assert hit["message"].endswith(f"{math.ceil(over / MIB):,} MiB over")

    code, hits, _ = fit_findings(cli, write(tmp_path, fleet([apu], services, ram="4GiB")))
    assert hits == [] and code == 0


def test_a_service_without_its_header_is_skipped_with_the_reason(cli: Any, tmp_path: Path) -> None:
    """A model not on this machine is not guessed: the rule skips that service and
    still judges the device with what it can size."""
    services = {"chat": chat(8080, "g0", 32768, 2), "other": chat(8081, "g0")}
    services["other"]["model"] = "absent"
    path = write(tmp_path, fleet([nvidia("g0", "1GiB")], services))
    code, (hit,), doc = fit_findings(cli, path)
    assert code == 1
    assert "(without other, which could not be sized here)" in hit["message"]
    (skip,) = [s for s in doc["skipped"] if s["rule"] == "device-memory-fit"]
    assert skip["subject"] == "other"
    assert "model 'absent' is not on this machine" in skip["reason"]

    code, hits, doc = fit_findings(cli, write(tmp_path, fleet([nvidia("g0", "2GiB")], services)))
    assert hits == [] and code == 0
    assert [s["subject"] for s in doc["skipped"] if s["rule"] == "device-memory-fit"] == ["other"]


def test_check_and_budget_size_a_projector_alike(cli: Any, tmp_path: Path) -> None:
    """L-28: the projector (1.5x its declared size) is in the device's bill, as in budget's."""
    data = fleet([nvidia("g0", "1536MiB")], {"chat": chat(8080, "g0", 4096, 1)})
    data["services"]["chat"]["mmproj"] = "mmproj.gguf"
    gemma = data["models"]["gemma"]
    gemma["files"].append({"path": "mmproj.gguf", "size": 300 * MIB})
    path = write(tmp_path, data)
    code, (hit,), _ = fit_findings(cli, path)
    device = bill(cli, path, "chat", "g0")
    assert device["projector"] == 450 * MIB
    assert f"chat {mib(device['used'])} (llama.cpp budget)" in hit["message"]

    assert device["used"] - device["projector"] + GIB < 1536 * MIB  # it is the projector
    small = copy.deepcopy(data)
    small["models"]["gemma"]["files"][-1]["size"] = 10 * MIB
    code, hits, _ = fit_findings(cli, write(tmp_path, small, "small.yaml"))
    assert hits == [] and code == 0


def test_a_flag_that_cannot_be_sized_is_skipped_with_the_budgets_error(
    cli: Any, tmp_path: Path
) -> None:
    """A bad ``-ub`` in extra_args: the rule says why it could not size the service.
    A good one is sized: on a card the default micro-batch fits, -ub 2048 does not (L-30)."""
    services = {"chat": chat(8080, "g0", 32768, 2)}
    services["chat"]["extra_args"] = ["-ub", "zero"]
    path = write(tmp_path, fleet([nvidia("g0", "1650MiB")], services))
    code, hits, doc = fit_findings(cli, path)
    assert hits == [] and code == 0
    (skip,) = [s for s in doc["skipped"] if s["rule"] == "device-memory-fit"]
    assert skip["subject"] == "chat"
    assert "extra_args has -ub 'zero': the micro-batch must be a positive number" in skip["reason"]

    services["chat"]["extra_args"] = []
    code, hits, doc = fit_findings(cli, write(tmp_path, fleet([nvidia("g0", "1650MiB")], services)))
    assert (code, hits, doc["skipped"]) == (0, [], [])
    services["chat"]["extra_args"] = ["-ub", "2048"]
    path = write(tmp_path, fleet([nvidia("g0", "1650MiB")], services))
    code, (hit,), doc = fit_findings(cli, path)
    big = bill(cli, path, "chat", "g0")
    # (the unknown-flag rule skips: this fleet's binary is not on this machine)
    assert code == 1 and [s for s in doc["skipped"] if s["rule"] == "device-memory-fit"] == []
    assert f"chat {mib(big['used'])} (llama.cpp budget)" in hit["message"]
