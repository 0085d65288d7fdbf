"""KV bytes from the header (L-29), sliding windows (L-15) and nextn layers (L-12)."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from fixtures.gguf_builder import ARRAY, BOOL, STRING, UINT32, GGUFBuilder, gemma3_like
from helpers.real_model import GEMMA

from inferfleet.gguf import GGUFError, attention_layout, inspect, read_header_bytes
from inferfleet.gguf.kv import kv_bytes, kv_bytes_per_token

MIB = 1 << 20

# Measured with llama.cpp build 11434 (CPU) on the real Gemma 3 270M Q4_K_M
# (port 18556 because 18555 was taken by another running server):
#   llama-server -m gemma-3-270m-q4_k_m.gguf --host 127.0.0.1 --port 18556 \
#       -c 8192 --parallel 2 -lv 4
#   llama_context: n_ctx = 8192, n_ctx_seq = 4096, n_ubatch = 512, kv_unified = false
#   llama_kv_cache: size =   24.00 MiB (  4096 cells,   3 layers,  2/2 seqs), K (f16): 12.00 MiB
#   llama_kv_cache: size =   30.00 MiB (  1024 cells,  15 layers,  2/2 seqs), K (f16): 15.00 MiB
LLAMA_SERVER_FULL = (24.00, 4096, 3)  # MiB, cells per stream, layers
LLAMA_SERVER_SWA = (30.00, 1024, 15)


def _layout(b: GGUFBuilder):  # type: ignore[no-untyped-def]
    layout = attention_layout(read_header_bytes(b.build()).metadata)
    assert layout is not None
    return layout


def test_gemma3_pattern_every_sixth_layer_is_global() -> None:
    layout = _layout(gemma3_like())
    assert layout.indices("full") == (5, 11, 17)
    assert len(layout.indices("swa")) == 15
    assert layout.sliding_window == 512
    per = kv_bytes_per_token(layout)
    # 1 KV head x 256 dims x 2 bytes (f16), K and V: 1024 B per layer and token.
    assert (per.full, per.swa, per.nextn) == (3 * 1024, 15 * 1024, 0)


def test_kv_bytes_match_llama_server_for_gemma3_shape() -> None:
    est = kv_bytes(_layout(gemma3_like()), 8192, parallel=2)
    assert (est.streams, est.cells_full, est.cells_swa) == (2, 4096, 1024)
    assert est.full_bytes / MIB == LLAMA_SERVER_FULL[0]
    assert est.swa_bytes / MIB == LLAMA_SERVER_SWA[0]


def test_swa_cache_is_capped_by_the_window_not_the_context() -> None:
    layout = _layout(gemma3_like())
    small = kv_bytes(layout, 1000)  # padded to 1024 cells; window + ubatch = 1024
    big = kv_bytes(layout, 131072)
    assert small.cells_swa == big.cells_swa == 1024
    assert big.cells_full == 131072
    unified = kv_bytes(layout, 8192, parallel=2, unified=True)
    assert (unified.streams, unified.cells_full, unified.cells_swa) == (1, 8192, 1536)
    assert kv_bytes(layout, 8192, swa_full=True).cells_swa == 8192


def test_quantized_cache_types() -> None:
    layout = _layout(gemma3_like())
    # q8_0: 32 values in 34 bytes -> 256 dims take 272 bytes.
    assert kv_bytes_per_token(layout, "q8_0", "q8_0").full == 3 * 2 * 272
    assert kv_bytes_per_token(layout, "f16", "q4_0").full == 3 * (512 + 144)
    with pytest.raises(ValueError, match="unknown ggml type"):
        kv_bytes_per_token(layout, "q9_9")


def test_pattern_keys_override_the_arch_default() -> None:
    flags = [il % 2 == 0 for il in range(18)]
    b = gemma3_like().kv("gemma3.attention.sliding_window_pattern", ARRAY, (BOOL, flags))
    assert _layout(b).indices("swa") == tuple(range(0, 18, 2))
    b = gemma3_like().kv("gemma3.attention.sliding_window_pattern", UINT32, 3)
    assert _layout(b).indices("full") == (2, 5, 8, 11, 14, 17)


def test_no_window_means_every_layer_is_full() -> None:
    layout = _layout(gemma3_like(window=0))
    assert layout.indices("full") == tuple(range(18)) and layout.sliding_window == 0
    assert kv_bytes(layout, 4096).cells_swa == 0


def test_unknown_arch_with_a_window_is_counted_full_with_a_note() -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "newarch")
    b.kv("newarch.block_count", UINT32, 4).kv("newarch.attention.head_count", UINT32, 8)
    b.kv("newarch.embedding_length", UINT32, 1024).kv(
        "newarch.attention.sliding_window", UINT32, 64
    )
    layout = _layout(b)
    assert layout.indices("full") == (0, 1, 2, 3)
    assert "upper bound" in layout.notes[0]
    # Head dim defaults to embedding / heads = 128; KV heads default to heads.
    assert kv_bytes_per_token(layout).full == 4 * 8 * 128 * 2 * 2


def test_hybrid_pays_kv_only_on_attention_layers() -> None:
    # L-29: a Qwen3.5-style hybrid, 3 linear-attention layers per attention layer.
    b = GGUFBuilder().kv("general.architecture", STRING, "qwen35")
    b.kv("qwen35.block_count", UINT32, 8).kv("qwen35.attention.head_count", UINT32, 16)
    b.kv("qwen35.attention.head_count_kv", UINT32, 2).kv("qwen35.embedding_length", UINT32, 2048)
    b.kv("qwen35.attention.key_length", UINT32, 256).kv(
        "qwen35.attention.value_length", UINT32, 256
    )
    b.kv("qwen35.full_attention_interval", UINT32, 4)
    layout = _layout(b)
    assert layout.indices("full") == (3, 7)
    assert layout.indices("recurrent") == (0, 1, 2, 4, 5, 6)
    assert kv_bytes_per_token(layout).full == 2 * (2 * 256 * 2 * 2)


def test_per_layer_kv_heads_with_zeros_mark_recurrent_layers() -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "lfm2")
    b.kv("lfm2.block_count", UINT32, 6).kv("lfm2.attention.head_count", UINT32, 16)
    b.kv("lfm2.embedding_length", UINT32, 1024)
    b.kv("lfm2.attention.head_count_kv", ARRAY, (UINT32, [0, 0, 8, 0, 0, 8]))
    layout = _layout(b)
    assert layout.indices("full") == (2, 5) and layout.indices("recurrent") == (0, 1, 3, 4)
    assert kv_bytes_per_token(layout).full == 2 * (8 * 64 * 2 * 2)


def test_nextn_layers_are_detected_and_kept_out_of_the_main_cache() -> None:
    # L-12: MTP is a property of the file. GLM-4.5-style: the last block is nextn.
    b = GGUFBuilder().kv("general.architecture", STRING, "glm4moe")
    b.kv("glm4moe.block_count", UINT32, 4).kv("glm4moe.nextn_predict_layers", UINT32, 1)
    b.kv("glm4moe.attention.head_count", UINT32, 8).kv("glm4moe.embedding_length", UINT32, 512)
    layout = _layout(b)
    assert layout.n_nextn == 1 and layout.indices("nextn") == (3,)
    per = kv_bytes_per_token(layout)
    assert per.full == 3 * 8 * 64 * 2 * 2 and per.nextn == 8 * 64 * 2 * 2
    assert inspect_bytes(b).nextn_layers == 1
    assert inspect_bytes(gemma3_like()).nextn_layers == 0


def test_mla_caches_no_v() -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "deepseek2")
    b.kv("deepseek2.block_count", UINT32, 2).kv("deepseek2.attention.head_count", UINT32, 16)
    b.kv("deepseek2.attention.head_count_kv", UINT32, 1)
    b.kv("deepseek2.attention.key_length", UINT32, 576)
    b.kv("deepseek2.attention.value_length", UINT32, 512)
    b.kv("deepseek2.attention.key_length_mla", UINT32, 192)
    b.kv("deepseek2.attention.value_length_mla", UINT32, 128)
    assert kv_bytes_per_token(_layout(b)).full == 2 * 576 * 2


def inspect_bytes(b: GGUFBuilder):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        return inspect(b.write(Path(tmp) / "m.gguf"))


def test_odd_cache_row_is_a_clear_error() -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "x").kv("x.block_count", UINT32, 1)
    b.kv("x.attention.head_count", UINT32, 1).kv("x.attention.key_length", UINT32, 40)
    with pytest.raises(GGUFError, match="not a multiple of the q8_0 block size"):
        kv_bytes_per_token(_layout(b), "q8_0", "f16")


@pytest.mark.usefixtures("gemma_file")
def test_real_gemma_kv_matches_measured_llama_server() -> None:
    est = inspect(GEMMA).kv_bytes(8192, parallel=2)
    assert est is not None
    assert (est.full_bytes / MIB, est.cells_full) == LLAMA_SERVER_FULL[:2]
    assert (est.swa_bytes / MIB, est.cells_swa) == LLAMA_SERVER_SWA[:2]


_SIZE_LINE = re.compile(r"size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers")


@pytest.mark.slow
@pytest.mark.usefixtures("gemma_file")
def test_kv_matches_a_running_llama_server(tmp_path: Path, llama_server_binary: Path) -> None:
    from helpers import free_port

    log = tmp_path / "server.log"
    cmd = [
        str(llama_server_binary),
        "-m",
        str(GEMMA),
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
    ]
    cmd += ["-c", "8192", "--parallel", "2", "-lv", "4"]
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(_SIZE_LINE.findall(log.read_text())) < 2:
                assert proc.poll() is None, log.read_text()[-2000:]
                time.sleep(0.2)
        finally:
            proc.kill()  # by the pid we started (L-43)
            proc.wait(10)
    sizes = sorted((float(m), int(c), int(n)) for m, c, n in _SIZE_LINE.findall(log.read_text()))
    est = inspect(GEMMA).kv_bytes(8192, parallel=2)
    assert est is not None
    ours = sorted(
        [(est.full_bytes / MIB, est.cells_full, 3), (est.swa_bytes / MIB, est.cells_swa, 15)]
    )
    assert sizes[:2] == ours
