"""The document of ``budget``."""

from __future__ import annotations

from typing import (
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


class BudgetModel(TypedDict):
    location: str
    architecture: str | None
    trained_context: int | None


class BudgetContext(TypedDict):
    ctx: int
    ctx_per_slot: int
    parallel: int
    cache_type_k: str
    cache_type_v: str
    flash_attn: bool
    n_ubatch: int
    unified: bool
    streams: int
    cells_full: int
    cells_swa: int
    kv_bytes: int


class BudgetDevice(TypedDict):
    """One device's share, in bytes."""

    name: str
    kind: str
    runtime_name: str | None
    memory: int | None  # None: the fleet file does not say
    weights: int
    kv: int
    state: int
    compute: int
    output: int
    projector: int
    drafter: int
    headroom: int
    used: int
    margin: int | None
    fits: bool | None  # None: unknown memory, so unknown
    measured: bool  # weights holds the measured non-KV cost (weights + compute)


class BudgetSolve(TypedDict):
    ctx_per_slot: int | None
    ctx: int | None
    limit: str


class MemoryParts(TypedDict):
    model: int
    context: int
    compute: int
    total: int


class BudgetComparison(TypedDict):
    device: str
    n_ctx: int
    measured: MemoryParts
    predicted: MemoryParts


class Budget(TypedDict):
    """A budget as data (``budget.report.budget_document``); sizes in bytes."""

    model: BudgetModel
    context: BudgetContext
    devices: list[BudgetDevice]
    fits: bool
    notes: list[str]


class BudgetService(Budget):
    service: str
    solve: BudgetSolve | None  # with --solve
    measured: list[BudgetComparison] | None  # with --from-log


class BudgetSkip(TypedDict):
    service: str
    reason: str


class BudgetVllm(TypedDict):
    """A vLLM service's budget (``budget.vllm_report``); sizes in bytes."""

    service: str
    model: str  # where its config and headers were read
    device: str  # cpu, or the accelerator vendor
    dtype: str  # what vLLM runs the model in
    weights: int  # in memory: float tensors cast to dtype
    weights_on_disk: int  # the safetensors headers' tensor bytes
    kv_bytes_per_token: int  # one rank, all layers
    kv_pool: int  # the KV cache memory of one rank
    exact: bool  # the pool is given (VLLM_CPU_KVCACHE_SPACE); False: estimated
    block_size: int
    bytes_per_block: int
    blocks: int
    blocks_per_request: int
    tokens: int  # what vLLM logs as "KV cache size: N tokens"
    max_model_len: int
    max_num_seqs: int
    wanted_tokens: int  # max_model_len x max_num_seqs
    starts: bool  # one request at max_model_len fits
    fits: bool  # every slot's window fits at once
    notes: list[str]


class BudgetGroup(TypedDict):
    group: str
    max_loaded: int  # 0: no limit
    bytes: int  # the largest simultaneous set
    counted: list[str]
    members: list[str]
    unsized: list[str]


class BudgetRpcPool(TypedDict):
    label: str  # host | a local device | worker HOST:DEVICE
    device: str  # llama.cpp's name: CPU, CUDA0, RPC0
    layers: int  # layer slots (blocks + output layer)
    weights_bytes: int  # what the server logs as that device's model buffer
    memory_bytes: int
    fits: bool


class BudgetRpc(TypedDict):
    """A model split over RPC workers: what --rpc and --tensor-split put where."""

    service: str
    n_gpu_layers: int
    tensor_split: list[float]  # one share per device, RPC devices first
    pools: list[BudgetRpcPool]
    fits: bool


class BudgetDocument(TypedDict):
    schema: Literal["inferfleet.budget/v1"]
    file: str
    services: list[BudgetService]
    vllm: list[BudgetVllm]
    skipped: list[BudgetSkip]
    groups: list[BudgetGroup]
    rpc: NotRequired[list[BudgetRpc]]
