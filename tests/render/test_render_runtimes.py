"""Runtime adapters: a service becomes argv, as data (llama.cpp, vLLM, SGLang)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from render_helpers import load

from inferfleet.errors import SpecError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.loader import parse_fleet
from inferfleet.render.facts import HostFacts, facts_for
from inferfleet.render.launch import resolve
from inferfleet.render.pipeline import service_launch
from inferfleet.runtimes.base import AdapterError
from inferfleet.runtimes.registry import traits

BASE = """
hosts:
  box:
    ssh: {user: ops}
    devices:
      - {name: g0, vendor: nvidia, memory: 24GiB}
      - {name: g1, vendor: nvidia, memory: 24GiB}
      - {name: r0, vendor: amd, memory: 48GiB}
runtimes:
  lcpp: {kind: llama.cpp, binary: /opt/llama/llama-server}
  vllm: {kind: vllm, image: "docker.io/vllm/vllm-openai@sha256:DIGEST_A"}
  sgl: {kind: sglang, image: "docker.io/lmsysorg/sglang@sha256:DIGEST_B"}
models:
  m: {source: {path: /m}, files: [{path: m.gguf, size: 1}, {path: proj.gguf, size: 1}]}
  d: {source: {path: /d}, files: [{path: d.gguf, size: 1}]}
  hf: {source: {path: /hf}, files: [{path: config.json, size: 1}]}
services: {}
""".replace("DIGEST_A", "a" * 64).replace("DIGEST_B", "b" * 64)


def argv_for(tmp_path: Path, **service: Any) -> list[str]:
    spec = {"host": "box", "port": 9000, "ctx_per_slot": 4096, **service}
    text = BASE.replace("services: {}", "services:\n  s: " + json.dumps(spec))
    fleet = parse_fleet(text, tmp_path / "fleet.yaml")
    return resolve(fleet, tmp_path, "s", facts_for(fleet)["box"]).argv


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def lcpp(tmp_path: Path, **service: Any) -> list[str]:
    return argv_for(tmp_path, runtime="lcpp", model="m", **service)


def test_llamacpp_pool_is_per_slot_times_slots(tmp_path: Path) -> None:
    argv = lcpp(tmp_path, parallel=3)
    assert flag(argv, "--ctx-size") == "12288" and flag(argv, "--parallel") == "3"  # L-25
    assert "--no-kv-unified" in argv and "--metrics" in argv  # L-56
    assert argv[0] == "/opt/llama/llama-server" and flag(argv, "--model") == "/m/m.gguf"


def test_llamacpp_devices_split_and_asymmetric_kv(tmp_path: Path) -> None:
    argv = lcpp(
        tmp_path,
        devices=["g0", "g1"],
        split_mode="row",
        tensor_split=[3, 1.5],
        kv_cache={"k": "f16", "v": "q8_0"},
        flash_attn="on",
    )
    assert flag(argv, "--device") == "CUDA0,CUDA1" and flag(argv, "--split-mode") == "row"
    assert flag(argv, "--tensor-split") == "3,1.5"
    assert flag(argv, "--cache-type-k") == "f16" and flag(argv, "--cache-type-v") == "q8_0"


def test_llamacpp_overrides_are_one_list_with_cpu_last(tmp_path: Path) -> None:
    """L-17: ONE joined list in first-match order; broad CPU patterns after specific ones."""
    argv = lcpp(
        tmp_path,
        devices=["g0"],
        tensor_overrides=[
            {"pattern": "exps", "device": "CPU"},
            {"pattern": r"blk\.1\.ffn_.*_exps", "device": "g0"},
            {"pattern": "ffn_up", "device": "CPU"},
        ],
    )
    assert argv.count("--override-tensor") == 1
    assert flag(argv, "--override-tensor") == r"blk\.1\.ffn_.*_exps=CUDA0,exps=CPU,ffn_up=CPU"


def test_llamacpp_speculative_set(tmp_path: Path) -> None:
    argv = lcpp(
        tmp_path,
        devices=["g0", "g1"],
        speculative={
            "types": ["draft-simple", "ngram-mod"],
            "draft_model": "d",
            "draft_device": "g1",
            "draft_max": 8,
            "draft_min": 1,
            "draft_p_min": 0.5,
            "draft_kv_cache": {"k": "q8_0", "v": "q8_0"},
        },
    )
    assert flag(argv, "--spec-type") == "draft-simple,ngram-mod"
    assert flag(argv, "--spec-draft-model") == "/d/d.gguf"
    assert flag(argv, "--spec-draft-device") == "CUDA1"  # L-16
    assert flag(argv, "--spec-draft-n-max") == "8" and flag(argv, "--spec-draft-p-min") == "0.5"
    assert flag(argv, "--spec-draft-type-v") == "q8_0"


@pytest.mark.parametrize(
    ("speculative", "message"),
    [
        ({"draft_model": "d"}, "without a spec type"),  # L-13
        ({"types": ["draft-simple"]}, "needs speculative.draft_model"),  # L-13
        ({"types": ["ngram-mod"], "draft_max": 4}, "without a drafter"),  # L-13
        ({"types": ["draft-mtp", "draft-eagle3"], "draft_model": "d"}, "more than one"),  # L-14
    ],
)
def test_llamacpp_refuses_an_incomplete_speculative_set(
    tmp_path: Path, speculative: dict[str, Any], message: str
) -> None:
    with pytest.raises(AdapterError, match=message):
        lcpp(tmp_path, speculative=speculative)


def test_llamacpp_no_drafting_arm_emits_no_spec_flag(tmp_path: Path) -> None:
    argv = lcpp(tmp_path, speculative={"types": []})
    assert not [a for a in argv if a.startswith("--spec")]


def test_llamacpp_jinja_template_and_projector(tmp_path: Path) -> None:
    argv = lcpp(
        tmp_path,
        mmproj="proj.gguf",
        chat_template_file="t.jinja",
        chat_template_kwargs={"b": 1, "a": "x"},
        client={"tools": True, "input": ["text", "image"]},
    )
    assert "--jinja" in argv  # L-18
    assert flag(argv, "--mmproj") == "/m/proj.gguf"  # L-22
    assert flag(argv, "--chat-template-file") == "/home/ops/fleet/t.jinja"  # L-19
    assert flag(argv, "--chat-template-kwargs") == '{"a":"x","b":1}'  # sorted: byte-stable
    assert "--no-jinja" in lcpp(tmp_path, jinja=False)
    assert "--jinja" not in lcpp(tmp_path)  # the server's default stays untouched


def test_process_launch_comes_from_the_one_pipeline(tmp_path: Path) -> None:
    """The process backend's argv and env come from the same launch as every unit."""
    fleet = parse_fleet(
        BASE.replace(
            "services: {}",
            "services:\n  s: {host: box, runtime: lcpp, model: m, port: 9000, "
            "ctx_per_slot: 2048, parallel: 2, mmproj: proj.gguf, env: {GGML_X: '1'}}",
        ),
        tmp_path / "fleet.yaml",
    )
    facts = HostFacts(user="u", home="/home/u", cache_dir="/c", fleet_dir=str(tmp_path))
    launch = service_launch(fleet, tmp_path, "s", facts)
    argv = launch.argv
    assert argv[:3] == ["/opt/llama/llama-server", "--model", "/m/m.gguf"]
    assert flag(argv, "--mmproj") == "/m/proj.gguf"
    assert flag(argv, "--ctx-size") == "4096"  # L-25: the pool is 2048 x 2
    assert argv == resolve(fleet, tmp_path, "s", facts).argv  # render writes the same argv
    # A stray LLAMA_ARG_* in the operator's shell never reaches the server.
    env = launch.process_env({"LLAMA_ARG_CTX_SIZE": "1", "PATH": "/bin"})
    assert env == {"PATH": "/bin", "GGML_X": "1"}
    # The digest names the declared model files: a new sha256 is a new launch.
    text = BASE.replace(
        "{path: m.gguf, size: 1}", "{path: m.gguf, size: 1, sha256: " + "ab" * 32 + "}"
    )
    other = parse_fleet(
        text.replace(
            "services: {}",
            "services:\n  s: "
            + json.dumps(fleet.services["s"].model_dump(mode="json", exclude_defaults=True)),
        ),
        tmp_path / "f.yaml",
    )
    assert service_launch(other, tmp_path, "s", facts).spec != launch.spec
    assert service_launch(fleet, tmp_path, "s", facts).spec == launch.spec


def vllm(tmp_path: Path, **service: Any) -> list[str]:
    return argv_for(tmp_path, runtime="vllm", model="hf", backend="quadlet", **service)


def test_vllm_window_slots_memory_and_tensor_parallel(tmp_path: Path) -> None:
    argv = vllm(tmp_path, devices=["g0", "g1"], parallel=8)
    assert argv[:3] == ["vllm", "serve", "/models/hf"]
    assert flag(argv, "--max-model-len") == "4096" and flag(argv, "--max-num-seqs") == "8"
    assert flag(argv, "--gpu-memory-utilization") == "0.9"  # the capped default (L-32)
    assert flag(argv, "--tensor-parallel-size") == "2"
    assert flag(argv, "--host") == "0.0.0.0"  # inside its container; published on the bind
    assert flag(argv, "--kv-cache-dtype") == "auto"


def test_vllm_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="L-32"):
        vllm(tmp_path, gpu_memory_utilization=1.0)
    with pytest.raises(AdapterError, match="L-21"):
        vllm(tmp_path, kv_cache={"k": "fp8", "v": "f16"})
    with pytest.raises(AdapterError, match="no q8_0 KV cache"):
        vllm(tmp_path, kv_cache={"k": "q8_0", "v": "q8_0"})
    with pytest.raises(AdapterError, match="tool_parser"):
        vllm(tmp_path, client={"tools": True})
    with pytest.raises(AdapterError, match="vision tower"):
        argv_for(tmp_path, runtime="vllm", model="m", backend="quadlet", mmproj="proj.gguf")


def test_vllm_tools_reasoning_and_mtp(tmp_path: Path) -> None:
    argv = vllm(
        tmp_path,
        tool_parser="hermes",
        reasoning_parser="qwen3",
        client={"tools": True},
        speculative={"types": ["draft-mtp"], "draft_max": 2},
    )
    assert "--enable-auto-tool-choice" in argv and flag(argv, "--tool-call-parser") == "hermes"
    assert flag(argv, "--reasoning-parser") == "qwen3"
    assert json.loads(flag(argv, "--speculative-config")) == {
        "method": "mtp",
        "num_speculative_tokens": 2,
    }


def test_sglang_equivalents(tmp_path: Path) -> None:
    argv = argv_for(
        tmp_path,
        runtime="sgl",
        model="hf",
        backend="quadlet",
        parallel=4,
        kv_cache={"k": "fp8_e5m2", "v": "fp8_e5m2"},
        client={"input": ["text", "image"]},
        speculative={"types": ["draft-eagle3"], "draft_model": "d", "draft_max": 3},
    )
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert flag(argv, "--context-length") == "4096"
    assert flag(argv, "--max-running-requests") == "4"
    assert flag(argv, "--mem-fraction-static") == "0.85"
    assert flag(argv, "--kv-cache-dtype") == "fp8_e5m2"
    assert "--enable-metrics" in argv and "--enable-multimodal" in argv  # L-56
    assert flag(argv, "--speculative-algorithm") == "EAGLE3"
    assert flag(argv, "--speculative-draft-model-path") == "/models/d/d.gguf"
    with pytest.raises(AdapterError, match="L-21"):
        argv_for(tmp_path, runtime="sgl", model="hf", kv_cache={"k": "f16", "v": "fp8_e4m3"})


@pytest.mark.parametrize(
    ("kind", "binary", "start"),
    [
        ("vllm", "/opt/vllm/bin/vllm", ["/opt/vllm/bin/vllm", "serve", "/hf"]),
        (
            "vllm",
            "/opt/venv/bin/python3.12",
            [
                "/opt/venv/bin/python3.12",
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "/hf",
            ],
        ),
        (
            "sglang",
            "/opt/venv/bin/python",
            ["/opt/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/hf"],
        ),
        (
            "sglang",
            "/usr/local/bin/sglang-launch",
            ["/usr/local/bin/sglang-launch", "--model-path", "/hf"],
        ),
    ],
)
def test_binary_runtime_runs_what_its_name_says(
    tmp_path: Path, kind: str, binary: str, start: list[str]
) -> None:
    """A `binary:` vLLM/SGLang runtime starts its server as an operator would: the `vllm`
    console script with `serve MODEL`, a Python interpreter with the server module."""
    text = BASE.replace(
        "runtimes:\n", f"runtimes:\n  bin: {{kind: {kind}, binary: {binary}}}\n"
    ).replace("services: {}", "services:\n  s: " + json.dumps(
        {"host": "box", "port": 9000, "ctx_per_slot": 4096, "runtime": "bin", "model": "hf"}
    ))  # fmt: skip
    fleet = parse_fleet(text, tmp_path / "fleet.yaml")
    argv = resolve(fleet, tmp_path, "s", facts_for(fleet)["box"]).argv
    assert argv[: len(start)] == start
    assert argv.count("/hf") == 1 and flag(argv, "--port") == "9000"


def test_each_runtime_knows_its_reasoning_field_and_series() -> None:
    """L-45: where reasoning lands; and the /metrics names alerts are built from."""
    assert traits("llama.cpp").reasoning_field == "reasoning_content"
    assert traits("vllm").reasoning_field == "reasoning"
    assert traits("sglang").reasoning_field == "reasoning_content"
    assert traits("llama.cpp").metrics.waiting == "llamacpp:requests_deferred"
    assert traits("vllm").metrics.running == "vllm:num_requests_running"
    assert traits("sglang").metrics.waiting == "sglang:num_queue_reqs"
    with pytest.raises(AdapterError, match="no adapter"):
        traits("tgi")


def test_homelab_argv_round_trip() -> None:
    fleet: Fleet = load("homelab").fleet
    argv = resolve(fleet, Path("."), "vision", facts_for(fleet)["nova"]).argv
    assert flag(argv, "--spec-type") == "draft-mtp" and "--spec-draft-model" not in argv
    assert flag(argv, "--device") == "ROCm0"


def test_quadlet_backend_needs_a_container_runtime(tmp_path: Path) -> None:
    spec = "{host: box, runtime: lcpp, model: m, port: 9000, ctx_per_slot: 4096, backend: quadlet}"
    with pytest.raises(
        SpecError, match="backend quadlet, but runtime 'lcpp' has no container image"
    ):
        parse_fleet(BASE.replace("services: {}", "services:\n  s: " + spec), tmp_path / "f.yaml")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("speculative: {types: [draft-simple], draft_model: nope}", "draft model 'nope'"),
        ("speculative: {types: [draft-mtp], draft_device: nope}", "draft device 'nope'"),
        ("tensor_overrides: [{pattern: x, device: nope}]", "neither CPU nor a device"),
        ("mmproj: missing.gguf", "not a declared file of model 'm'"),
        ("devices: [g0, g1]\n    tensor_split: [1]", "1 shares for 2 devices"),
    ],
)
def test_option_references_are_checked_on_load(tmp_path: Path, option: str, message: str) -> None:
    text = BASE.replace(
        "services: {}",
        "services:\n  s:\n    host: box\n    runtime: lcpp\n    model: m\n    port: 9000\n"
        f"    ctx_per_slot: 4096\n    {option}",
    )
    with pytest.raises(SpecError, match=message) as info:
        parse_fleet(text, tmp_path / "fleet.yaml")
    service_line = text.splitlines().index("  s:") + 1
    assert info.value.line is not None and info.value.line >= service_line
