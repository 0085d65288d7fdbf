"""A vLLM service's memory: weights, KV bytes per token, the KV pool vLLM builds (pure).

The settings are read back from the argv the vLLM adapter renders
(:func:`inferfleet.runtimes.vllm.argv`, ``extra_args`` included), so the
budget sizes exactly what vLLM is started with: ``--max-model-len`` (the
per-slot window), ``--max-num-seqs`` (the slots), ``--dtype``,
``--kv-cache-dtype``, ``--block-size``, ``--tensor-parallel-size``,
``--gpu-memory-utilization``, ``--max-num-batched-tokens``,
``--kv-cache-memory-bytes`` and ``--num-gpu-blocks-override``.

KV bytes: on CPU, ``VLLM_CPU_KVCACHE_SPACE`` (GiB, from the service's
``runtime_env`` or ``env``) or ``--kv-cache-memory-bytes`` is the pool, and
the capacity is exact. Without either, the launch sets
``VLLM_CPU_KVCACHE_SPACE`` itself to what :func:`launch_kv_space` prices from
the declared memory (left alone, vLLM on CPU takes a share of the host's
whole RAM, not the memory the fleet declares), so the budget is exact there
too. On a GPU vLLM measures what its memory share leaves after the weights in
a profile run at start; here that is an estimate (weights and
:data:`~inferfleet.budget.vllm_kv.GPU_OVERHEAD` subtracted), and the budget
says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferfleet.artifacts.st_model import SafetensorsModel
from inferfleet.budget.errors import BudgetError
from inferfleet.budget.vllm_kv import (
    CPU_BLOCK_SIZE,
    GIB,
    GPU_BLOCK_SIZE,
    GPU_OVERHEAD,
    TORCH_BYTES,
    KvCapacity,
    cache_dtype_bytes,
    kv_capacity,
    kv_shape,
    model_dtype,
)
from inferfleet.documents import BudgetVllm
from inferfleet.fleetfile.fleet import Device, Host, Service
from inferfleet.runtimes import vllm
from inferfleet.runtimes.base import Launch
from inferfleet.runtimes.flags import parse_args

KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"
CPU_OVERHEAD = 1 * GIB  # torch and vLLM's own resident memory besides the weights (estimate)


@dataclass(frozen=True)
class VllmSettings:
    """What the vLLM adapter starts the service with, as numbers."""

    max_model_len: int
    max_num_seqs: int
    dtype: str
    kv_cache_dtype: str
    block_size: int | None
    tensor_parallel: int
    share: float
    max_num_batched_tokens: int | None
    kv_cache_memory_bytes: int | None
    num_gpu_blocks_override: int | None


def _number(flag: str, value: str | None, kind: type[int] | type[float]) -> int | float:
    try:
        found = kind(value or "")
    except ValueError:
        found = 0
    if found <= 0:
        raise BudgetError(
            f"{flag} {value!r} is not a positive number", hint="fix it in the service's extra_args"
        )
    return found


def vllm_settings(name: str, service: Service, host: Host) -> VllmSettings:
    """The service's vLLM settings, read from the adapter's own argv."""
    launch = Launch(
        service_name=name,
        service=service,
        host=host,
        program=["vllm", "serve"],
        model_path="MODEL",
        listen_host=service.bind,
        listen_port=service.port,
        draft_model_path="DRAFT",
        chat_template_path=service.chat_template_file,
    )
    values: dict[str, str | None] = {}
    for arg in parse_args(vllm.argv(launch)[2:], vllm.FLAGS.takes):
        if arg.flag is not None:
            values[vllm.FLAGS.canonical(arg.flag)] = arg.value  # the last one wins

    def num(flag: str, kind: type[int] | type[float] = int) -> int | float | None:
        return _number(flag, values[flag], kind) if flag in values else None

    tp = num("--tensor-parallel-size") or num("-tp") or 1
    return VllmSettings(
        max_model_len=int(num("--max-model-len") or 0),
        max_num_seqs=int(num("--max-num-seqs") or 1),
        dtype=values.get("--dtype") or "auto",
        kv_cache_dtype=values.get("--kv-cache-dtype") or "auto",
        block_size=_opt_int(num("--block-size")),
        tensor_parallel=int(tp),
        share=float(num("--gpu-memory-utilization", float) or vllm.DEFAULT_GPU_MEMORY_UTILIZATION),
        max_num_batched_tokens=_opt_int(num("--max-num-batched-tokens")),
        kv_cache_memory_bytes=_opt_int(num("--kv-cache-memory-bytes")),
        num_gpu_blocks_override=_opt_int(num("--num-gpu-blocks-override")),
    )


def _opt_int(value: int | float | None) -> int | None:
    return None if value is None else int(value)


def kv_space(service: Service) -> int | None:
    """``VLLM_CPU_KVCACHE_SPACE`` in bytes, from runtime_env (else env); vLLM reads an int."""
    text = service.runtime_env.get(KV_SPACE_ENV) or service.env.get(KV_SPACE_ENV)
    if not text:
        return None
    if not text.isdigit() or int(text) <= 0:
        raise BudgetError(
            f"{KV_SPACE_ENV}={text!r}: vLLM reads a whole number of GiB",
            hint=f"set runtime_env.{KV_SPACE_ENV} to e.g. 4",
        )
    return int(text) * GIB


def declared_ram(host: Host) -> int | None:
    """The memory a CPU engine may use on ``host``: its cpu device's, else the host's RAM."""
    return next((d.memory for d in host.devices if d.vendor == "cpu"), None) or host.ram


def launch_kv_space(
    name: str, service: Service, host: Host, devices: list[Device], weights_on_disk: int
) -> int | None:
    """The KV pool (bytes, whole GiB: vLLM reads an int) the launch gives a vLLM service on
    CPU through ``VLLM_CPU_KVCACHE_SPACE``: the declared memory times the memory share,
    less the weights (their files' sizes) and :data:`CPU_OVERHEAD`, rounded down.

    None where it is not the launch's to set: on a GPU, with the space or
    ``--kv-cache-memory-bytes`` given, or with no memory declared to size it from.
    """
    if devices or kv_space(service) is not None:
        return None
    settings = vllm_settings(name, service, host)
    ram = declared_ram(host)
    if settings.kv_cache_memory_bytes is not None or ram is None:
        return None
    free = int(ram * settings.share) - weights_on_disk - CPU_OVERHEAD
    return max(free // GIB, 0) * GIB


@dataclass(frozen=True)
class VllmBudget:
    """What one vLLM service holds, and whether its slots fit."""

    service: str
    model: SafetensorsModel
    settings: VllmSettings
    device: str  # "cpu", or the accelerator kind
    devices: tuple[Device, ...]  # the accelerators (none on CPU)
    run_dtype: str
    kv_bytes: int  # the KV pool of one rank
    exact: bool  # the pool is given (CPU space / --kv-cache-memory-bytes), not estimated
    capacity: KvCapacity
    notes: tuple[str, ...]

    @property
    def weights_bytes(self) -> int:
        """The weights in memory: float tensors in the dtype vLLM runs (see run_weights)."""
        return run_weights(self.model, self.run_dtype)

    @property
    def kv_token_bytes(self) -> int:
        """KV bytes per token of one rank (all layers)."""
        return self.capacity.shape.token_bytes

    @property
    def wanted_tokens(self) -> int:
        return self.settings.max_model_len * self.settings.max_num_seqs

    @property
    def starts(self) -> bool:
        """vLLM refuses to start when one request at max_model_len does not fit."""
        return self.capacity.requests_that_fit() >= 1

    @property
    def fits(self) -> bool:
        """Every slot can hold its whole window at once (L-25)."""
        return self.capacity.requests_that_fit() >= self.settings.max_num_seqs

    @property
    def host_bytes(self) -> int:
        """What the service takes from host memory on CPU: weights and a KV pool per rank."""
        if self.device != "cpu":
            return 0
        return self.weights_bytes + self.kv_bytes * self.settings.tensor_parallel


# Float dtypes vLLM casts to its run dtype on load; other tensors (quantized
# weights, their int/fp8 scales) keep their bytes.
CAST = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}


def run_weights(model: SafetensorsModel, run_dtype: str) -> int:
    """Bytes of the weights once loaded: float tensors in ``run_dtype``, the rest as stored."""
    size = TORCH_BYTES[run_dtype]
    return sum(n * size // CAST[dtype] if dtype in CAST else n for dtype, n in model.dtypes.items())


def _batched_tokens(settings: VllmSettings, devices: tuple[Device, ...]) -> tuple[int, list[str]]:
    """Tokens in flight per step (vLLM's max_in_flight_tokens) and what was assumed."""
    if not devices:  # CPU: the API server's default, no async scheduling
        return settings.max_num_batched_tokens or 2048 * settings.tensor_parallel, []
    memory = min(d.memory for d in devices)
    default = 16384 if memory >= 160 * GIB else 8192 if memory >= 70 * GIB else 2048
    batched = settings.max_num_batched_tokens or default
    notes = ["async scheduling doubles the tokens in flight (two batches) for sliding layers"]
    return 2 * batched, notes


def vllm_budget(
    name: str,
    service: Service,
    host: Host,
    model: SafetensorsModel,
    devices: list[Device],
) -> VllmBudget:
    """The budget of vLLM service ``name`` on ``devices`` (none: vLLM's CPU build)."""
    settings = vllm_settings(name, service, host)
    if settings.max_model_len <= 0:
        raise BudgetError(f"service {name!r} has no ctx_per_slot (--max-model-len)")
    config = model.config
    run_dtype = model_dtype(config.dtype, settings.dtype)
    cpu = not devices
    block = settings.block_size or (CPU_BLOCK_SIZE if cpu else GPU_BLOCK_SIZE)
    tp = settings.tensor_parallel
    shape = kv_shape(
        config,
        dtype_bytes=cache_dtype_bytes(settings.kv_cache_dtype, run_dtype),
        block_size=block,
        tensor_parallel=tp,
    )
    notes = list(model.notes) + list(config.notes)
    if settings.dtype == "auto" and config.dtype == "float32":
        notes.append("--dtype auto runs a float32 model in bfloat16 (vLLM downcasts it)")
    weights = run_weights(model, run_dtype)
    weights_rank = weights // tp
    space = kv_space(service) if cpu else None
    exact = True
    if space is not None:
        kv_bytes = space
    elif settings.kv_cache_memory_bytes is not None:
        kv_bytes = settings.kv_cache_memory_bytes
    elif cpu:
        ram = declared_ram(host)
        if ram is None:
            raise BudgetError(
                f"service {name!r}: vLLM on CPU sizes its KV cache from {KV_SPACE_ENV} or the "
                "host's memory, and neither is given",
                hint=f"set runtime_env.{KV_SPACE_ENV} (GiB), or the host's ram",
            )
        on_disk = sum(f.file_size for f in model.files)
        kv_bytes = launch_kv_space(name, service, host, [], on_disk) or 0
        notes.append(
            f"the launch sets {KV_SPACE_ENV}={kv_bytes // GIB}: {settings.share:g} x "
            f"{ram / GIB:.1f} GiB declared, less the weights' {on_disk / GIB:.2f} GiB and "
            f"~{CPU_OVERHEAD // GIB} GiB of runtime, in whole GiB"
        )
    else:
        exact = False
        memory = min(d.memory for d in devices)
        kv_bytes = int(memory * settings.share) - weights_rank - GPU_OVERHEAD
        notes.append(
            f"estimate: on a GPU vLLM measures in a profile run what gpu_memory_utilization "
            f"{settings.share:g} x {memory / GIB:.0f} GiB leaves after weights, activations, "
            f"CUDA graphs and non-torch memory; {GPU_OVERHEAD // GIB} GiB assumed for all "
            "but the weights. vLLM logs the real figure ('Available KV cache memory')"
        )
    in_flight, assumed = _batched_tokens(settings, tuple(devices))
    if config.sliding_layers:
        notes += assumed
    capacity = kv_capacity(
        shape,
        kv_bytes,
        max_model_len=settings.max_model_len,
        in_flight_tokens=in_flight,
        num_blocks_override=settings.num_gpu_blocks_override,
    )
    return VllmBudget(
        service=name,
        model=model,
        settings=settings,
        device="cpu" if cpu else devices[0].vendor,
        devices=tuple(devices),
        run_dtype=run_dtype,
        kv_bytes=kv_bytes,
        exact=exact,
        capacity=capacity,
        notes=tuple(notes),
    )


def vllm_document(budget: VllmBudget) -> BudgetVllm:
    """The budget as data (``inferfleet budget --json``)."""
    capacity = budget.capacity
    return BudgetVllm(
        service=budget.service,
        model=budget.model.location,
        device=budget.device,
        dtype=budget.run_dtype,
        weights=budget.weights_bytes,
        weights_on_disk=budget.model.weights_bytes,
        kv_bytes_per_token=budget.kv_token_bytes,
        kv_pool=budget.kv_bytes,
        exact=budget.exact,
        block_size=capacity.shape.block_size,
        bytes_per_block=capacity.bytes_per_block,
        blocks=capacity.num_blocks,
        blocks_per_request=capacity.blocks_per_request,
        tokens=capacity.tokens,
        max_model_len=budget.settings.max_model_len,
        max_num_seqs=budget.settings.max_num_seqs,
        wanted_tokens=budget.wanted_tokens,
        starts=budget.starts,
        fits=budget.fits,
        notes=list(budget.notes),
    )
