"""``inferfleet budget`` through the real entry point, on a fleet around the real model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from budget_helpers import DATA, GEMMA, MIB, needs_gemma, serving, write_fleet

pytestmark = needs_gemma
Cli = Callable[..., Any]
JSONL = DATA / "llama-server-b11434-gemma3-c8192-np2.jsonl"
TEXT = DATA / "llama-server-b11434-gemma3-c4096-q8_0.log"


def _doc(result: Any) -> dict[str, Any]:
    assert result.code in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.budget/v1"
    return doc


def test_human_budget_of_the_real_model(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, {})
    result = cli("budget", "svc", "-f", str(fleet))
    assert result.code == 0, result.stderr
    assert "KV cache 54.00 MiB (full 2 x 4096 cells, SWA 2 x 1024 cells)" in result.stdout
    assert "235.16" in result.stdout and "fits" in result.stdout  # weights, MiB
    assert "flash_attn auto" in result.stdout  # the assumption is said, not hidden


def test_json_document(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, {"kv_cache": {"k": "q8_0", "v": "q8_0"}, "flash_attn": "on"})
    doc = _doc(cli("budget", "-f", str(fleet), "--json"))
    (service,) = doc["services"]
    assert service["service"] == "svc" and service["fits"] is True
    context = service["context"]
    assert (context["ctx"], context["streams"], context["cells_swa"]) == (8192, 2, 1024)
    device = service["devices"][0]
    assert device["name"] == "cpu0" and device["kind"] == "host"
    # q8_0: 272 bytes a 256-value row; 3 global layers x 8192 cells + 15 SWA x 2048, K and V.
    assert device["kv"] == (3 * 8192 + 15 * 2048) * 2 * 272
    assert device["margin"] == device["memory"] - device["used"] - 1024 * MIB
    assert service["solve"] is None and service["measured"] is None


def test_solve_is_capped_by_the_trained_context(cli: Cli, tmp_path: Path) -> None:
    doc = _doc(cli("budget", "svc", "-f", str(write_fleet(tmp_path, {})), "--solve", "--json"))
    solve = doc["services"][0]["solve"]
    assert solve == {
        "ctx_per_slot": 32768,
        "ctx": 65536,
        "limit": "the model's trained context (32768 per slot)",
    }


def test_a_device_too_small_exits_1_with_the_shortfall(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, {})
    text = fleet.read_text().replace("memory: 2GiB", "memory: 1GiB")
    fleet.write_text(text)
    result = cli("budget", "svc", "-f", str(fleet))
    assert result.code == 1
    assert "does not fit" in result.stdout and "-" in result.stdout
    solved = cli("budget", "svc", "-f", str(fleet), "--solve")
    assert solved.code == 1 and "no context fits" in solved.stdout


def test_from_log_compares_and_calibrates(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, {})
    doc = _doc(cli("budget", "svc", "-f", str(fleet), "--from-log", str(JSONL), "--json"))
    service = doc["services"][0]
    (measured,) = service["measured"]
    assert measured["measured"]["context"] == 54 * MIB == measured["predicted"]["context"]
    assert measured["measured"]["total"] == (235 + 12 + 54 + 23) * MIB  # Host row + CPU_REPACK
    device = service["devices"][0]
    assert device["measured"] is True and device["weights"] == (235 + 12 + 23) * MIB
    assert "one boot + estimated slope" in " ".join(service["notes"])
    two = _doc(
        cli(
            "budget", "svc", "-f", str(fleet), "--from-log", str(JSONL), "--from-log", str(TEXT),
            "--json",
        )
    )  # fmt: skip
    notes = " ".join(two["services"][0]["notes"])
    assert "non-KV cost from two boots" in notes
    assert "ran with slots 1 (service: 2)" in notes and "K cache q8_0" in notes


def test_two_boots_on_the_command_line(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, {})
    # 270 MiB of non-KV at -c 8192 and 310 at -c 65536: 40 MiB over 57344 tokens.
    args = ["budget", "svc", "-f", str(fleet), "--json", "--solve"]
    doc = _doc(cli(*args, "--boot", "8192=324", "--boot", "65536=532"))
    service = doc["services"][0]
    assert "cpu0: non-KV cost from two boots" in service["notes"]
    device = service["devices"][0]
    # At the solution (-c 65536): 532 MiB measured minus 222 MiB of KV predicted = 310.
    assert device["weights"] == 310 * MIB and device["kv"] == 222 * MIB


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--boot", "8192"], "expected CTX=MiB"),
        (["--boot", "8192=1"], "less than the KV cache alone"),
        (["--boot", "8192=300", "--boot", "8192=320"], "two different contexts"),
        (["--boot", "8192=300", "--from-log", str(JSONL)], "either --boot or --from-log"),
    ],
)
def test_bad_boot_arguments(cli: Cli, tmp_path: Path, args: list[str], message: str) -> None:
    result = cli("budget", "svc", "-f", str(write_fleet(tmp_path, {})), *args)
    assert result.code == 2 and message in result.stderr


def test_missing_model_file_says_what_to_do(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, {})
    empty = tmp_path / "empty"
    empty.mkdir()
    fleet.write_text(fleet.read_text().replace(str(GEMMA.parent), str(empty)))
    result = cli("budget", "svc", "-f", str(fleet))
    assert result.code == 2
    assert "could not size model 'gemma'" in result.stderr
    assert (
        "is not on this machine" in result.stderr and f"run budget where {empty}" in result.stderr
    )
    # Fleet-wide, the service is reported as skipped and the run exits 2: could not size.
    doc = json.loads(cli("budget", "-f", str(fleet), "--json").stdout)
    assert doc["services"] == [] and "not on this machine" in doc["skipped"][0]["reason"]
    assert cli("budget", "-f", str(fleet)).code == 2


def _hub_fleet(tmp_path: Path) -> Path:
    models = {
        "gemma": {
            "source": {"hub": "org/gemma-GGUF", "revision": "main"},
            "dir": str(tmp_path / "nowhere"),
            "files": [{"path": GEMMA.name, "size": 253113024}],
        }
    }
    return write_fleet(tmp_path, {}, models=models)


def test_hub_model_not_here_offline_says_why(cli: Cli, tmp_path: Path) -> None:
    result = cli("budget", "svc", "-f", str(_hub_fleet(tmp_path)), "--offline")
    assert result.code == 2
    assert "no network request" in result.stderr and "drop --offline" in result.stderr


def test_remote_reads_the_header_with_few_range_requests(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"/org/gemma-GGUF/resolve/main/{GEMMA.name}"
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))  # a cold header cache
    with serving({path: GEMMA}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        fleet = _hub_fleet(tmp_path)
        doc = _doc(cli("budget", "svc", "-f", str(fleet), "--remote", "--json"))
    assert doc["services"][0]["context"]["kv_bytes"] == 54 * MIB
    assert 1 <= len(server.requests) <= 4


def test_services_budget_does_not_size_are_skipped(cli: Cli, tmp_path: Path) -> None:
    fleet = write_fleet(
        tmp_path,
        {},
        runtimes={
            "llama": {"kind": "llama.cpp", "binary": "/usr/bin/true"},
            "vllm": {"kind": "vllm", "image": "docker.io/x/vllm@sha256:" + "a" * 64},
        },
    )
    text = fleet.read_text()
    for name, runtime, port in (("other", "vllm", 8081), ("svc2", "llama", 8082)):
        text += f"  {name}:\n    host: box\n    runtime: {runtime}\n    model: gemma\n"
        text += f"    port: {port}\n    ctx_per_slot: 4096\n"
    fleet.write_text(text)
    doc = _doc(cli("budget", "-f", str(fleet), "--json"))
    assert [s["service"] for s in doc["services"]] == ["svc", "svc2"]
    assert doc["skipped"][0]["service"] == "other" and "vllm" in doc["skipped"][0]["reason"]
    named = cli("budget", "other", "-f", str(fleet))
    assert named.code == 2 and "budget sizes llama.cpp and vLLM services" in named.stderr
    both = cli("budget", "-f", str(fleet), "--boot", "8192=300")
    assert both.code == 2 and "name the SERVICE" in both.stderr
    unknown = cli("budget", "nope", "-f", str(fleet))
    assert unknown.code == 2 and "no service named 'nope'" in unknown.stderr


def test_projector_drafter_and_ctx_override(cli: Cli, tmp_path: Path) -> None:
    # L-28: the projector at 1.5x its declared size; L-15: the drafter (here the
    # model itself) caches the target's whole context.
    files = [
        {"path": GEMMA.name, "size": 253113024},
        {"path": "mmproj-F16.gguf", "size": 200 * MIB},
    ]
    models = {"gemma": {"source": {"path": str(GEMMA.parent)}, "files": files}}
    service = {
        "mmproj": "mmproj-F16.gguf",
        "speculative": {"types": ["draft-simple"], "draft_model": "gemma"},
    }
    fleet = write_fleet(tmp_path, service, models=models)
    doc = _doc(cli("budget", "svc", "-f", str(fleet), "--ctx", "16384", "--json"))
    service_doc = doc["services"][0]
    assert service_doc["context"]["ctx"] == 32768
    device = service_doc["devices"][0]
    assert device["projector"] == 300 * MIB
    # Drafter: its weights, its KV at -c 32768 x 2 slots (= the target's), its compute.
    assert device["drafter"] > device["weights"] + device["kv"]
    assert device["drafter"] < device["weights"] + device["kv"] + device["compute"] + 64 * MIB
