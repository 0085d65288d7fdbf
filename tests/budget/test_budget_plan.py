"""Placement on devices (layer split, overrides, tied output), projector (L-28),
fits with the margin, and the largest context that fits (L-27)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from fixtures.gguf_builder import F32, Q8_0, GGUFBuilder, gemma3_like

from inferfleet.budget import (
    BudgetError,
    BudgetRequest,
    ContextShape,
    Drafter,
    ModelShape,
    Target,
    plan,
    solve,
)
from inferfleet.budget.placement import layer_slots, split_points
from inferfleet.budget.service import server_flags, service_request
from inferfleet.fleetfile.fleet import Host, Service

Shape = Callable[[GGUFBuilder], ModelShape]
GIB, MIB = 1 << 30, 1 << 20
BIG = Target("gpu0", "gpu", 24 * GIB, "CUDA0")
SMALL = Target("gpu1", "gpu", 8 * GIB, "CUDA1")
HOST = Target("host", "host", 64 * GIB, "CPU")


def _model(layers: int = 18, *, output: bool = False) -> GGUFBuilder:
    b = gemma3_like(layers=layers)
    for il in range(layers):
        b.tensor(f"blk.{il}.ffn_up_exps.weight", (640, 1024), Q8_0)
    if output:
        b.tensor("output.weight", (640, 64), Q8_0)
    b.tensor("output_norm.weight", (640,), F32)
    return b


def _layer_bytes(model: ModelShape, il: int) -> int:
    return sum(size for name, size in model.tensors if name.startswith(f"blk.{il}."))


def test_layer_split_follows_llama_cpp_split_points() -> None:
    # 18 blocks + output = 19 slots; 24 GiB and 8 GiB: split point 0.75 ->
    # blocks 0..14 (14/19 < 0.75) on the first device, 15..17 and the output on the second.
    assert layer_slots(18, split_points([24, 8])) == [0] * 15 + [1] * 4
    assert layer_slots(18, split_points([1, 1])) == [0] * 10 + [1] * 9
    assert layer_slots(18, split_points([1])) == [0] * 19
    with pytest.raises(BudgetError, match="positive sum"):
        split_points([0, 0])


def test_weights_and_kv_land_on_the_layers_device(shape_of: Shape) -> None:
    model = shape_of(_model())
    budget = plan(BudgetRequest(model, ContextShape(8192), (BIG, SMALL, HOST), shares=(1.0, 1.0)))
    gpu0, gpu1, host = budget.devices
    assert gpu0.weights == sum(_layer_bytes(model, il) for il in range(10))
    embedding = model.tensor_bytes("token_embd.weight")
    output_norm = model.tensor_bytes("output_norm.weight")
    # Tied output: no output.weight, so the embedding is loaded again on the output device.
    assert gpu1.weights == sum(_layer_bytes(model, il) for il in range(10, 18)) + embedding + (
        output_norm
    )
    assert host.weights == embedding  # the input layer stays in host memory
    # Full layers 5 and 11 hold 8192 cells, SWA layers 1024 (f16 K+V: 1 KiB a cell).
    assert gpu0.kv == (1 * 8192 + 9 * 1024) * 1024  # layers 0..9: full layer 5
    assert gpu1.kv == (2 * 8192 + 6 * 1024) * 1024  # layers 10..17: full 11 and 17
    assert gpu0.compute > 0 and gpu1.compute > 0 and 0 < host.compute < gpu0.compute
    assert host.output == 64 * 4  # logits: one row of the 64-token vocabulary per slot, f32


def test_an_untied_output_is_not_duplicated(shape_of: Shape) -> None:
    model = shape_of(_model(output=True))
    budget = plan(BudgetRequest(model, ContextShape(4096), (BIG, HOST)))
    assert not model.tied_output
    assert budget.devices[0].weights == model.weights_bytes - model.tensor_bytes(
        "token_embd.weight"
    )


def test_overrides_move_tensors_to_host_memory_first_match_wins(shape_of: Shape) -> None:
    # L-17: the expert tensors of the last layers live in system RAM.
    model = shape_of(_model())
    overrides = (("blk\\.1[5-7]\\.ffn_up_exps", "gpu0"), ("ffn_up_exps", "CPU"), ("nope", "CPU"))
    budget = plan(BudgetRequest(model, ContextShape(4096), (BIG, HOST), overrides=overrides))
    expert = model.tensor_bytes("blk.0.ffn_up_exps.weight")
    gpu, host = budget.devices
    assert host.weights == model.tensor_bytes("token_embd.weight") + 15 * expert
    assert gpu.weights + host.weights == model.weights_bytes + model.tensor_bytes(
        "token_embd.weight"
    )
    assert any("'nope' matches no tensor" in note for note in budget.notes)
    # The CPU now runs layer work: its compute buffer is a device's, not the small host one.
    assert host.compute > 2 * 512 * 640 * 4


def test_override_to_an_unknown_device_or_a_bad_pattern_is_an_error(shape_of: Shape) -> None:
    model = shape_of(_model(2))
    with pytest.raises(BudgetError, match="not a device of this service"):
        plan(BudgetRequest(model, ContextShape(4096), (BIG, HOST), overrides=(("x", "gpu7"),)))
    with pytest.raises(BudgetError, match="not a regular expression"):
        plan(BudgetRequest(model, ContextShape(4096), (BIG, HOST), overrides=(("(", "CPU"),)))


def test_split_modes(shape_of: Shape) -> None:
    model = shape_of(_model())
    shape = ContextShape(8192)
    none = plan(BudgetRequest(model, shape, (BIG, SMALL, HOST), split_mode="none"))
    assert none.devices[1].weights == 0 and none.devices[1].kv == 0
    row = plan(BudgetRequest(model, shape, (BIG, SMALL, HOST), split_mode="row", shares=(3, 1)))
    assert row.devices[1].kv == 0  # row split keeps the KV cache on the main device
    assert row.devices[1].weights == pytest.approx(row.devices[0].weights / 3, rel=0.35)
    tensor = plan(BudgetRequest(model, shape, (BIG, SMALL, HOST), split_mode="tensor"))
    assert tensor.devices[0].kv == pytest.approx(3 * tensor.devices[1].kv, rel=0.01)


def test_projector_costs_one_and_a_half_its_file_on_the_first_device(shape_of: Shape) -> None:
    # L-28: activations and compute buffers ride with the projector.
    model = shape_of(_model(2))
    budget = plan(BudgetRequest(model, ContextShape(4096), (BIG, HOST), projector_bytes=600 * MIB))
    assert budget.devices[0].projector == 900 * MIB and budget.devices[1].projector == 0
    cpu_only = plan(BudgetRequest(model, ContextShape(4096), (HOST,), projector_bytes=600 * MIB))
    assert cpu_only.devices[0].projector == 900 * MIB


def test_a_pinned_drafter_stays_on_its_device(shape_of: Shape) -> None:
    # L-16: pinned to one device; L-15: its cache follows the target's context.
    model, drafter = shape_of(_model()), shape_of(gemma3_like(layers=4, window=0))
    request = BudgetRequest(
        model, ContextShape(65536, 2), (BIG, SMALL, HOST), drafter=Drafter(drafter, device="gpu1")
    )
    gpu0, gpu1, host = plan(request).devices
    assert gpu0.drafter == 0
    assert gpu1.drafter > 4 * 65536 * 1024  # the drafter caches all 65536 tokens on 4 layers
    assert host.drafter == drafter.tensor_bytes("token_embd.weight")
    with pytest.raises(BudgetError, match="pinned to 'gpu9'"):
        plan(replace(request, drafter=Drafter(drafter, device="gpu9")))


def test_fits_with_the_margin_and_headroom(shape_of: Shape) -> None:
    model = shape_of(_model(2))
    tight = Target("cpu0", "host", 0, "CPU")
    for memory, fits in ((4 * GIB, True), (1 * GIB, False)):
        budget = plan(BudgetRequest(model, ContextShape(4096), (replace(tight, memory=memory),)))
        device = budget.devices[0]
        assert device.margin == memory - device.used - 1024 * MIB
        assert device.fits is fits and budget.fits is fits
    unknown = plan(BudgetRequest(model, ContextShape(4096), (replace(tight, memory=None),)))
    assert unknown.devices[0].fits is None and unknown.fits  # unknown size is not a failure


def test_solve_finds_the_largest_multiple_of_4096_that_fits(shape_of: Shape) -> None:
    # 18 layers without a window: 18 KiB of f16 KV a token; 2 slots on 4 GiB.
    model = replace(shape_of(gemma3_like(window=0)), context_length=1 << 20)
    request = BudgetRequest(model, ContextShape(8192, 2), (Target("cpu0", "host", 4 * GIB, "CPU"),))
    solution = solve(request)
    assert solution.ctx_per_slot is not None and solution.ctx_per_slot % 4096 == 0
    assert solution.ctx_per_slot > 65536
    assert solution.budget.fits and solution.limit == "device memory"
    bigger = replace(request.context, ctx=(solution.ctx_per_slot + 4096) * 2)
    assert not plan(replace(request, context=bigger)).fits


def test_solve_is_capped_by_the_trained_context_and_reports_nothing_fits(shape_of: Shape) -> None:
    model = shape_of(_model(2))  # gemma3_like: trained context 32768
    roomy = BudgetRequest(model, ContextShape(4096), (Target("c", "host", 64 * GIB, "CPU"),))
    assert solve(roomy).ctx_per_slot == 32768
    assert "trained context" in solve(roomy).limit
    tiny = replace(roomy, targets=(Target("c", "host", 512 * MIB, "CPU"),))
    none = solve(tiny)
    assert none.ctx_per_slot is None and "do not fit" in none.limit


def test_service_flags_and_targets_from_the_fleet(shape_of: Shape) -> None:
    assert server_flags(["-ub", "128", "--swa-full"]).n_ubatch == 128
    assert server_flags(["--ubatch-size=256", "--kv-unified"]).unified
    with pytest.raises(BudgetError, match="micro-batch"):
        server_flags(["-ub", "lots"])
    host = Host.model_validate(
        {
            "devices": [
                {"name": "a", "vendor": "nvidia", "memory": "24GiB"},
                {"name": "b", "vendor": "nvidia", "memory": "8GiB"},
            ],
            "ram": "64GiB",
        }
    )
    service = Service.model_validate(
        {
            "host": "h", "runtime": "r", "model": "m", "port": 1, "ctx_per_slot": 8192,
            "parallel": 3, "devices": ["a", "b"], "kv_cache": {"k": "q8_0", "v": "q8_0"},
            "flash_attn": "on", "extra_args": ["-ub", "1024"],
            "tensor_overrides": [
                {"pattern": "exps", "device": "CPU"}, {"pattern": "x", "device": "b"},
            ],
            "speculative": {"types": ["draft-mtp"], "draft_max": 4},
        }
    )  # fmt: skip
    request = service_request(service, host, shape_of(_model(2)))
    assert [t.runtime_name for t in request.targets] == ["CUDA0", "CUDA1", "CPU"]
    assert request.targets[-1].memory == 64 * GIB  # no CPU device: the host's RAM
    assert request.context.ctx == 8192 * 3 and request.context.n_ubatch == 1024
    assert request.overrides == (("x", "CUDA1"), ("exps", "CPU"))  # the server's order (L-17)
    assert request.drafter == Drafter(None)  # draft-mtp on the model's own layers
