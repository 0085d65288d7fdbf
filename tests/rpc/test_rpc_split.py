"""The split over the host, RPC workers and local GPUs, as llama.cpp b11434 places layers."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.rpc_fleet import SERVICE, rpc_data, write

from inferfleet.budget.errors import BudgetError
from inferfleet.budget.rpc import Pool, rpc_split
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.rpc import server_rpc_args, split_pools

MIB = 1 << 20


def _tensors(n_layer: int, block: int = 10 * MIB, *, output: bool = True) -> list[tuple[str, int]]:
    found = [("token_embd.weight", 50 * MIB), ("output_norm.weight", MIB)]
    if output:
        found.append(("output.weight", 40 * MIB))
    for il in range(n_layer):
        found += [(f"blk.{il}.attn_q.weight", block // 2), (f"blk.{il}.ffn_up.weight", block // 2)]
    return found


HOST = Pool("cpu0", "CPU", 1024 * MIB, "host")


def test_a_cpu_host_keeps_the_first_layers_in_proportion_to_memory() -> None:
    worker = Pool("worker h2:cpu0", "RPC0", 3072 * MIB, "rpc")
    split = rpc_split(15, _tensors(15), host=HOST, workers=[worker])
    # 16 slots (15 blocks + output): a quarter of the memory keeps 4 of them on the host
    assert split.layers == (4, 12)
    assert split.n_gpu_layers == 12 and split.tensor_split == (1.0,)
    # host: the input layer and blocks 0-3; worker: blocks 4-14 and the output layer
    assert split.weights == (50 * MIB + 4 * 10 * MIB, 11 * 10 * MIB + 41 * MIB)
    assert split.devices == ["RPC0"]
    assert split.overflows() == []


def test_workers_split_by_memory_and_a_tied_output_is_copied_to_its_device() -> None:
    workers = [
        Pool("worker h2:cpu0", "RPC0", 2048 * MIB, "rpc"),
        Pool("worker h3:cpu0", "RPC1", 2048 * MIB, "rpc"),
    ]
    split = rpc_split(19, _tensors(19, output=False), host=HOST, workers=workers, tied_output=True)
    assert split.layers == (4, 8, 8)
    assert split.tensor_split == (0.5, 0.5)
    # the last worker holds the output layer: a copy of the token embedding
    assert split.weights[2] == 7 * 10 * MIB + MIB + 50 * MIB


def test_with_local_gpus_every_layer_leaves_the_host() -> None:
    worker = Pool("worker h2:gpu0", "RPC0", 8192 * MIB, "rpc")
    gpu = Pool("gpu0", "CUDA0", 24576 * MIB, "gpu")
    split = rpc_split(31, _tensors(31), host=HOST, workers=[worker], gpus=[gpu])
    assert split.n_gpu_layers == 32 and split.layers == (0, 8, 24)
    assert split.devices == ["RPC0", "CUDA0"]  # RPC devices first (src/llama.cpp b11434)
    assert split.tensor_split == (0.25, 0.75)


def test_a_split_that_does_not_fit_names_the_device() -> None:
    worker = Pool("worker h2:cpu0", "RPC0", 20 * MIB, "rpc")
    split = rpc_split(
        15, _tensors(15), host=Pool("cpu0", "CPU", 400 * MIB, "host"), workers=[worker]
    )
    [line] = split.overflows()
    assert line.startswith("worker h2:cpu0 (RPC0) holds")


def test_no_memory_declared_is_refused() -> None:
    with pytest.raises(BudgetError, match="declared memory above 0"):
        rpc_split(4, _tensors(4), host=Pool("host", "CPU", 0, "host"), workers=[HOST])


def test_the_server_gets_rpc_before_device(tmp_path: Path) -> None:
    fleet = load_fleet(write(tmp_path / "fleet.yaml", rpc_data(worker_memory="3GiB"))).fleet
    host, workers, gpus = split_pools(fleet, SERVICE)
    assert (host.memory, [w.memory for w in workers], gpus) == (1 << 30, [3 << 30], [])
    split = rpc_split(17, _tensors(17), host=host, workers=workers)
    assert server_rpc_args(fleet, SERVICE, split) == [
        "--rpc",
        "10.250.7.2:50052",
        "--device",
        "RPC0",
        "--n-gpu-layers",
        "14",
        "--tensor-split",
        "1",
    ]
