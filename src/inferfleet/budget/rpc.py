"""One model across hosts: the split over local devices and RPC workers.

How llama.cpp b11434 places a model when ``--rpc`` names workers, read from
its source (``src/llama.cpp`` ``llama_model_load_from_file_impl``,
``src/llama-model.cpp`` ``load_tensors``, ``ggml/src/ggml-rpc/ggml-rpc.cpp``):

- the RPC servers' devices come first in the model's device list, in
  ``--rpc`` order ("add RPC servers at the front of the list to minimize
  network transfers"), then the local GPUs; ``--tensor-split`` gives one
  share per device in that order; the RPC devices are named ``RPC0``,
  ``RPC1``... and their buffers ``RPC<i>[ADDRESS:PORT]``;
- the CPU is no device of that list: the input layer stays in host memory,
  and the first ``n_layer + 1 - n_gpu_layers`` layer slots (blocks, then the
  output layer) stay there too; the other slots go to the devices at the
  split points of ``(il - first) / n_gpu_layers``;
- the server logs one ``model buffer size`` line per buffer (``CPU_Mapped``,
  ``RPC0[10.0.0.2:50052]``, ``CUDA0``), which ``tests/rpc`` compares with
  :attr:`RpcSplit.weights`.

The split follows memory: each local device and each worker's device takes
layers in proportion to its declared memory. With local GPUs every layer is
offloaded (the host keeps the input layer); on a CPU-only host, the host's CPU
device is one of the pools and keeps the first layers.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from inferfleet.budget.errors import BudgetError
from inferfleet.budget.placement import (
    LayerMap,
    LayerPlacement,
    f32,
    place_weights,
    split_points,
)
from inferfleet.documents import BudgetRpc, BudgetRpcPool


@dataclass(frozen=True)
class Pool:
    """One place layers go: the host's memory, a local GPU, or a worker's device."""

    label: str  # the fleet's name: "host", a device, or "worker HOST:DEVICE"
    runtime_name: str  # llama.cpp's device name: CPU, CUDA0, RPC0
    memory: int  # bytes declared for it
    kind: str  # host | gpu | rpc


@dataclass(frozen=True)
class RpcSplit:
    pools: tuple[Pool, ...]  # host first, then the devices in llama.cpp's order
    layers: tuple[int, ...]  # layer slots (blocks + output) on each pool
    weights: tuple[int, ...]  # bytes of weights on each pool
    n_gpu_layers: int  # -ngl: the slots that leave the host
    tensor_split: tuple[float, ...]  # one share per device (pools[1:])

    @property
    def devices(self) -> list[str]:
        """llama.cpp's names of the devices, for ``--device`` (RPC ones first)."""
        return [pool.runtime_name for pool in self.pools[1:]]

    def to_json(self, service: str) -> BudgetRpc:
        pools: list[BudgetRpcPool] = [
            {
                "label": pool.label,
                "device": pool.runtime_name,
                "layers": layers,
                "weights_bytes": weights,
                "memory_bytes": pool.memory,
                "fits": weights <= pool.memory,
            }
            for pool, layers, weights in zip(self.pools, self.layers, self.weights, strict=True)
        ]
        return {
            "service": service,
            "n_gpu_layers": self.n_gpu_layers,
            "tensor_split": list(self.tensor_split),
            "pools": pools,
            "fits": not self.overflows(),
        }

    def overflows(self) -> list[str]:
        """What does not fit: one line per pool whose weights exceed its memory."""
        return [
            f"{pool.label} ({pool.runtime_name}) holds {weights / 2**20:,.1f} MiB of weights "
            f"but has {pool.memory / 2**20:,.1f} MiB"
            for pool, weights in zip(self.pools, self.weights, strict=True)
            if weights > pool.memory
        ]


def rpc_split(
    n_layer: int,
    tensors: Sequence[tuple[str, int]],
    *,
    host: Pool,
    workers: Sequence[Pool],
    gpus: Sequence[Pool] = (),
    tied_output: bool = False,
) -> RpcSplit:
    """Split a model of ``n_layer`` blocks over the host, the workers and the local GPUs."""
    if not workers:
        raise BudgetError("an RPC split needs at least one worker")
    devices = [*workers, *gpus]
    if any(pool.memory <= 0 for pool in (host, *devices)):
        raise BudgetError(
            "every device of an RPC split needs a declared memory above 0",
            hint="give the devices memory: in hosts (what the runtime may use)",
        )
    slots = n_layer + 1
    if gpus:
        on_host = 0  # the GPUs and workers take every layer (-ngl all)
    else:
        total = host.memory + sum(pool.memory for pool in devices)
        # At least one slot leaves the host, else the workers would hold nothing.
        on_host = min(round(slots * host.memory / total), slots - 1)
    offloaded = slots - on_host
    memory = sum(pool.memory for pool in devices)
    # What --tensor-split will say, and what the split points are computed from.
    shares = tuple(round(pool.memory / memory, 4) for pool in devices)
    points = split_points(shares)
    last = len(points) - 1
    layer_map: LayerMap = []
    for il in range(slots):
        if il < on_host:
            layer_map.append([(0, 1.0)])
        else:
            k = bisect.bisect_right(points, f32((il - on_host) / offloaded))
            layer_map.append([(1 + min(k, last), 1.0)])
    pools = (host, *devices)
    placed = place_weights(
        tensors, LayerPlacement(layer_map, layer_map, 0), len(pools), tied_output=tied_output
    )
    layers = [0] * len(pools)
    for slot in layer_map:
        layers[slot[0][0]] += 1
    return RpcSplit(
        pools=pools,
        layers=tuple(layers),
        weights=tuple(placed.per_target),
        n_gpu_layers=offloaded,
        tensor_split=shares,
    )
