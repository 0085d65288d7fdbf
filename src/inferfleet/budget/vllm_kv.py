"""vLLM's own KV cache arithmetic, as vLLM 0.32 does it (pure).

Read from vLLM 0.32.0's source (``v1/kv_cache_interface.py``,
``v1/core/kv_cache_utils.py``, ``v1/worker/cpu_worker.py``,
``platforms/cpu.py``, ``config/model.py``, ``engine/arg_utils.py``):

- **Per layer and block** (``AttentionSpec.page_size_bytes``): ``block_size x
  KV heads on this rank x (head size of K + of V) x bytes of the cache
  dtype``. KV heads on a rank are ``max(1, num_key_value_heads // tp)``.
- **Dtype**: ``--kv-cache-dtype auto`` is the model dtype; ``--dtype auto``
  takes the config's dtype but downcasts float32 to bfloat16 (the first of
  the platform's supported dtypes); fp8 caches take one byte.
- **Block size**: 128 on CPU unless given (``CpuPlatform``), 16 elsewhere
  (``CacheConfig.DEFAULT_BLOCK_SIZE``; an attention backend may prefer
  another: give ``--block-size`` to be sure).
- **Groups** (``get_kv_cache_groups``): layers of one kind (full attention,
  or sliding with one window) form one group; a model with both is split
  into groups of equal layer count (``_get_kv_cache_groups_uniform_page_size``:
  the smaller kind's count, or the larger's when it is under 1.5 times the
  smaller), padded. One block of the pool holds a page of every layer of the
  widest group: ``bytes per block`` (``_get_kv_cache_bytes_per_block``).
- **Blocks**: ``num_blocks = kv_bytes // bytes_per_block``
  (``get_kv_cache_config_from_groups``); one is the null block the pool keeps.
- **Capacity it logs** (``get_kv_cache_capacity``): a request at
  ``max_model_len`` takes ``ceil(max_model_len / block_size)`` blocks of each
  full group and ``ceil(min(window - 1 + in-flight tokens, max_model_len) /
  block_size) + 1`` of each sliding group; ``concurrency = num_blocks /
  blocks per request`` and ``CPU KV cache size: int(concurrency x
  max_model_len) tokens``. That is ``num_blocks x block_size`` only when
  ``max_model_len`` is a multiple of the block size.
- **KV bytes**: on CPU, ``VLLM_CPU_KVCACHE_SPACE`` GiB exactly (or
  ``--kv-cache-memory-bytes``), so the capacity above is exact. On a GPU,
  vLLM measures in a profile run what ``gpu_memory_utilization x memory``
  leaves after weights, activations, CUDA graphs and non-torch memory; this
  module can only estimate that (:data:`GPU_OVERHEAD`), and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferfleet.artifacts.hfconfig import SLIDING, AttentionConfig
from inferfleet.budget.errors import BudgetError

GIB = 1 << 30
CPU_BLOCK_SIZE = 128  # CpuPlatform.check_and_update_config, when --block-size is not given
GPU_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE
# Bytes per element of vLLM's --dtype / --kv-cache-dtype values.
TORCH_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
_DTYPE_ALIASES = {"float": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16"}
# An estimate of what vLLM's profile run takes on a GPU besides the weights:
# the CUDA context and non-torch allocations, the activation peak of one
# max_num_batched_tokens step, and CUDA graphs. vLLM measures it at start.
GPU_OVERHEAD = 2 * GIB


def model_dtype(config_dtype: str | None, requested: str = "auto") -> str:
    """The dtype vLLM runs the model in (``_get_and_verify_dtype``)."""
    asked = _DTYPE_ALIASES.get(requested.lower(), requested.lower())
    if asked != "auto":
        if asked not in TORCH_BYTES:
            raise BudgetError(
                f"--dtype {requested!r} is not a dtype vLLM takes",
                hint="use auto, float32, float16 or bfloat16",
            )
        return asked
    found = _DTYPE_ALIASES.get(config_dtype or "", config_dtype or "float32")
    # auto: float32 models are downcast to the platform's first dtype (bfloat16).
    return found if found in ("float16", "bfloat16") else "bfloat16"


def cache_dtype_bytes(kv_cache_dtype: str, dtype: str) -> int:
    """Bytes per element of the KV cache: ``auto`` is the model dtype, fp8 one byte."""
    if kv_cache_dtype == "auto":
        return TORCH_BYTES[dtype]
    if kv_cache_dtype.startswith("fp8"):
        return 1
    if kv_cache_dtype in TORCH_BYTES or kv_cache_dtype in _DTYPE_ALIASES:
        return TORCH_BYTES[_DTYPE_ALIASES.get(kv_cache_dtype, kv_cache_dtype)]
    raise BudgetError(f"--kv-cache-dtype {kv_cache_dtype!r} is not sized by this budget")


@dataclass(frozen=True)
class KvShape:
    """What vLLM allocates per layer and block for one model and setting."""

    layer_types: tuple[str, ...]
    window: int | None
    kv_heads: int  # on one rank
    head_dim: int
    dtype_bytes: int
    block_size: int

    @property
    def layer_token_bytes(self) -> int:
        return self.kv_heads * 2 * self.head_dim * self.dtype_bytes

    @property
    def page_bytes(self) -> int:
        return self.block_size * self.layer_token_bytes

    @property
    def token_bytes(self) -> int:
        """KV bytes per token over all layers (a full-attention token)."""
        return len(self.layer_types) * self.layer_token_bytes


def kv_shape(
    config: AttentionConfig, *, dtype_bytes: int, block_size: int, tensor_parallel: int = 1
) -> KvShape:
    if block_size <= 0:
        raise BudgetError(f"block size {block_size} must be positive")
    return KvShape(
        layer_types=config.layer_types,
        window=config.sliding_window,
        kv_heads=max(1, config.n_kv_heads // max(tensor_parallel, 1)),
        head_dim=config.head_dim,
        dtype_bytes=dtype_bytes,
        block_size=block_size,
    )


@dataclass(frozen=True)
class KvCapacity:
    """The pool vLLM builds from ``kv_bytes``, and what it logs."""

    shape: KvShape
    kv_bytes: int
    max_model_len: int
    groups: tuple[tuple[str, int], ...]  # (layer kind, layers) per group
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int

    @property
    def concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request

    @property
    def tokens(self) -> int:
        """What vLLM logs as ``KV cache size: N tokens`` (get_kv_cache_capacity)."""
        return int(self.concurrency * self.max_model_len)

    @property
    def usable_blocks(self) -> int:
        return max(self.num_blocks - 1, 0)  # the block pool keeps one null block

    def requests_that_fit(self) -> int:
        """Requests at max_model_len the pool holds at once (the null block kept out)."""
        return self.usable_blocks // self.blocks_per_request


def _groups(types: tuple[str, ...]) -> list[tuple[str, int]]:
    """(kind, layers) of each KV cache group (_get_kv_cache_groups_uniform_page_size)."""
    buckets: dict[str, int] = {}
    for kind in types:
        buckets[kind] = buckets.get(kind, 0) + 1
    if len(buckets) == 1:
        return list(buckets.items())
    smallest, largest = min(buckets.values()), max(buckets.values())
    size = largest if largest < smallest * 1.5 else smallest
    groups = []
    for kind, count in buckets.items():
        n_groups = math.ceil(count / size)
        groups += [(kind, len(range(i, count, n_groups))) for i in range(n_groups)]
    return groups


def kv_capacity(
    shape: KvShape,
    kv_bytes: int,
    *,
    max_model_len: int,
    in_flight_tokens: int,
    num_blocks_override: int | None = None,
) -> KvCapacity:
    """The blocks and tokens vLLM gets from ``kv_bytes`` of KV cache memory."""
    if max_model_len <= 0:
        raise BudgetError(f"max_model_len {max_model_len} must be positive")
    groups = _groups(shape.layer_types)
    bytes_per_block = max(layers for _, layers in groups) * shape.page_bytes
    num_blocks = max(kv_bytes, 0) // bytes_per_block
    if num_blocks_override is not None:
        num_blocks = num_blocks_override
    full_blocks = math.ceil(max_model_len / shape.block_size)
    per_request = 0
    for kind, _ in groups:
        if kind == SLIDING:
            assert shape.window is not None
            tokens = min(shape.window - 1 + in_flight_tokens, max_model_len)
            per_request += math.ceil(tokens / shape.block_size) + 1
        else:
            per_request += full_blocks
    return KvCapacity(
        shape=shape,
        kv_bytes=kv_bytes,
        max_model_len=max_model_len,
        groups=tuple(groups),
        bytes_per_block=bytes_per_block,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
    )


def cpu_kv_cache_tokens(
    config: AttentionConfig,
    *,
    kv_space_gib: int,
    max_model_len: int,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    block_size: int = CPU_BLOCK_SIZE,
    max_num_batched_tokens: int = 2048,
) -> int:
    """What vLLM 0.32 on CPU logs as ``CPU KV cache size: N tokens`` with
    ``VLLM_CPU_KVCACHE_SPACE=kv_space_gib`` (tensor parallel 1, no speculative
    decoding; ``max_num_batched_tokens`` only matters for sliding layers: 2048
    is the CPU API server's default)."""
    run_dtype = model_dtype(config.dtype, dtype)
    shape = kv_shape(
        config, dtype_bytes=cache_dtype_bytes(kv_cache_dtype, run_dtype), block_size=block_size
    )
    found = kv_capacity(
        shape,
        kv_space_gib * GIB,
        max_model_len=max_model_len,
        in_flight_tokens=max_num_batched_tokens,
    )
    return found.tokens
