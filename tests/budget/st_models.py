"""Small synthetic safetensors models (written by the real ``safetensors`` library) and
fleets around them, for the vLLM budget tests.

The shapes are tiny: only the header's dtypes, shapes and offsets matter to the
budget, and the config states the test model's attention shape (Llama, hidden
256, 4 heads, 2 KV heads, head_dim 64, 2 layers, vocab 512, float32).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from safetensors.numpy import save_file

TINY_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
    "torch_dtype": "float32",
}


def tensors(layers: int = 2) -> dict[str, np.ndarray]:
    found = {"model.embed_tokens.weight": np.zeros((64, 8), dtype=np.float32)}
    for i in range(layers):
        found[f"model.layers.{i}.self_attn.q_proj.weight"] = np.ones((8, 8), dtype=np.float32)
        found[f"model.layers.{i}.input_layernorm.weight"] = np.ones((8,), dtype=np.float16)
    return found


def write_model(
    folder: Path, *, config: dict[str, Any] | None = None, sharded: bool = False
) -> int:
    """A model folder (config.json + weights); returns the weights' bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or TINY_CONFIG))
    weights = tensors()
    if not sharded:
        save_file(weights, str(folder / "model.safetensors"))
    else:
        names = sorted(weights)
        half = {"model-00001-of-00002.safetensors": names[:3]}
        half["model-00002-of-00002.safetensors"] = names[3:]
        for shard, keys in half.items():
            save_file({k: weights[k] for k in keys}, str(folder / shard))
        index = {"weight_map": {k: shard for shard, keys in half.items() for k in keys}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return sum(a.nbytes for a in weights.values())


def declared(folder: Path) -> list[dict[str, Any]]:
    import hashlib

    return [
        {
            "path": p.name,
            "size": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in sorted(folder.iterdir())
    ]


def vllm_fleet(
    tmp_path: Path,
    source: dict[str, Any],
    files: list[dict[str, Any]],
    *,
    service: dict[str, Any] | None = None,
    host: dict[str, Any] | None = None,
) -> Path:
    """fleet.yaml with one vLLM service ``tiny`` on model ``m``, on this host's CPU."""
    svc: dict[str, Any] = {
        "host": "local",
        "runtime": "v",
        "model": "m",
        "port": 8000,
        "ctx_per_slot": 1000,
        "parallel": 2,
        "extra_args": ["--dtype", "float32"],
        "runtime_env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        "client": {"max_tokens": 256},
    }
    svc.update(service or {})
    data = {
        "version": 1,
        "hosts": {"local": host or {"address": "localhost", "ram": "8GiB"}},
        "runtimes": {"v": {"kind": "vllm", "source": {"package": "vllm-cpu", "version": "0.32.0"}}},
        "models": {"m": {"source": source, "files": files}},
        "services": {"tiny": svc},
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
