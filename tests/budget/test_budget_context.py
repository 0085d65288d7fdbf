"""Context memory: every KV cache type, layouts (full, SWA, hybrid, recurrent, MLA),
recurrent state per slot (L-29), and the drafter sized by the target's context (L-15)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from budget_helpers import GEMMA, MIB, needs_gemma
from fixtures.gguf_builder import ARRAY, STRING, UINT32, GGUFBuilder, gemma3_like

from inferfleet.budget import (
    CACHE_TYPES,
    BudgetError,
    BudgetRequest,
    ContextShape,
    Drafter,
    ModelShape,
    Target,
    context_memory,
    model_shape,
    plan,
)
from inferfleet.gguf import inspect

Shape = Callable[[GGUFBuilder], ModelShape]
HOST = Target("cpu0", "host", 64 << 30, "CPU")

# Bytes of one 256-value row (one KV head of Gemma 3) in each -ctk/-ctv type:
# block size and bytes per block from ggml's type_traits.
ROW_256 = {
    "f32": 1024, "f16": 512, "bf16": 512, "q8_0": 8 * 34, "q4_0": 8 * 18,
    "q4_1": 8 * 20, "iq4_nl": 8 * 18, "q5_0": 8 * 22, "q5_1": 8 * 24,
}  # fmt: skip


def test_the_nine_cache_types_llama_cpp_accepts() -> None:
    assert set(CACHE_TYPES) == set(ROW_256)


@pytest.mark.parametrize("cache", CACHE_TYPES)
def test_every_cache_type_costs_its_block_bytes(shape_of: Shape, cache: str) -> None:
    model = shape_of(gemma3_like())
    memory = context_memory(model, ContextShape(8192, 2, cache, cache, flash_attn=True))
    # 3 global layers x 2 streams x 4096 cells, 15 SWA layers x 2 x 1024 cells; K + V.
    cells = 3 * 2 * 4096 + 15 * 2 * 1024
    assert memory.kv_bytes == cells * 2 * ROW_256[cache]
    assert memory.state_bytes == 0


def test_asymmetric_k_and_v(shape_of: Shape) -> None:
    model = shape_of(gemma3_like(window=0))
    memory = context_memory(model, ContextShape(4096, 1, "f16", "q8_0"))
    assert memory.kv_bytes == 18 * 4096 * (512 + 272)


def test_quantized_v_without_flash_attention_is_refused() -> None:
    # L-20: llama-server will not start with it, so neither does the budget.
    with pytest.raises(BudgetError, match="needs flash attention"):
        ContextShape(4096, 1, "f16", "q8_0", flash_attn=False)


def test_a_type_llama_cpp_has_no_cache_of_is_refused_with_the_list() -> None:
    with pytest.raises(BudgetError, match="no 'q4_K' K cache") as info:
        ContextShape(4096, 1, "q4_K", "f16")
    assert "iq4_nl" in info.value.hint


def test_rows_that_do_not_fill_a_block_are_a_clear_error(shape_of: Shape) -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "x").kv("x.block_count", UINT32, 1)
    b.kv("x.attention.head_count", UINT32, 1).kv("x.attention.key_length", UINT32, 40)
    model = shape_of(b)
    with pytest.raises(BudgetError, match="not a multiple of the q8_0 block size"):
        context_memory(model, ContextShape(4096, 1, "q8_0", "f16"))


def test_without_flash_attention_v_is_padded_to_the_widest_layer(shape_of: Shape) -> None:
    # SWA layers with 128-dim heads next to 256-dim global ones: V stored
    # transposed is padded to 256 on every layer (llama.cpp TAG_V_CACHE_VARIABLE).
    b = gemma3_like(layers=6).kv("gemma3.attention.key_length_swa", UINT32, 128)
    b.kv("gemma3.attention.value_length_swa", UINT32, 128)
    model = shape_of(b)
    on = context_memory(model, ContextShape(1024, 1, flash_attn=True))
    off = context_memory(model, ContextShape(1024, 1, flash_attn=False))
    assert on.kv_by_layer[0] == 1024 * (256 + 256)  # K 128 f16 + V 128 f16
    assert off.kv_by_layer[0] == 1024 * (256 + 512)  # V padded to 256
    assert on.kv_by_layer[5] == off.kv_by_layer[5] == 1024 * 1024


def test_mla_caches_one_compressed_k_and_no_v(shape_of: Shape) -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "deepseek2")
    b.kv("deepseek2.block_count", UINT32, 2).kv("deepseek2.attention.head_count", UINT32, 16)
    b.kv("deepseek2.attention.head_count_kv", UINT32, 1)
    b.kv("deepseek2.attention.key_length", UINT32, 576)
    b.kv("deepseek2.attention.value_length", UINT32, 512)
    b.kv("deepseek2.attention.key_length_mla", UINT32, 192)
    b.kv("deepseek2.attention.value_length_mla", UINT32, 128)
    model = shape_of(b)
    for fa in (True, False):
        memory = context_memory(model, ContextShape(4096, 1, flash_attn=fa))
        assert memory.kv_bytes == 2 * 4096 * 576 * 2


def _mamba(layers: int = 4) -> GGUFBuilder:
    b = GGUFBuilder().kv("general.architecture", STRING, "mamba")
    b.kv("mamba.block_count", UINT32, layers).kv("mamba.embedding_length", UINT32, 768)
    b.kv("mamba.ssm.conv_kernel", UINT32, 4).kv("mamba.ssm.inner_size", UINT32, 1536)
    b.kv("mamba.ssm.state_size", UINT32, 16)
    return b


def test_recurrent_state_is_per_slot_not_per_token(shape_of: Shape) -> None:
    # L-29: a Mamba layer keeps (d_conv-1) x d_inner conv values and
    # d_state x d_inner state values per slot, f32, whatever the context.
    model = shape_of(_mamba())
    per_row = (3 * 1536 + 16 * 1536) * 4
    small = context_memory(model, ContextShape(4096, 3))
    big = context_memory(model, ContextShape(262144, 3))
    assert small.kv_bytes == big.kv_bytes == 0
    assert small.state_bytes == big.state_bytes == 4 * 3 * per_row
    # Drafting with rollback keeps n_rs_seq more rows per slot.
    assert context_memory(model, ContextShape(4096, 3, n_rs_seq=3)).state_bytes == 4 * 12 * per_row


def test_hybrid_pays_kv_on_attention_layers_and_state_on_the_others(shape_of: Shape) -> None:
    # A Qwen3.5-style hybrid: 3 gated-delta-net layers per attention layer.
    b = GGUFBuilder().kv("general.architecture", STRING, "qwen35")
    b.kv("qwen35.block_count", UINT32, 8).kv("qwen35.attention.head_count", UINT32, 16)
    b.kv("qwen35.attention.head_count_kv", UINT32, 2).kv("qwen35.embedding_length", UINT32, 2048)
    b.kv("qwen35.attention.key_length", UINT32, 256).kv(
        "qwen35.attention.value_length", UINT32, 256
    )
    b.kv("qwen35.full_attention_interval", UINT32, 4).kv("qwen35.ssm.conv_kernel", UINT32, 4)
    b.kv("qwen35.ssm.inner_size", UINT32, 4096).kv("qwen35.ssm.state_size", UINT32, 128)
    b.kv("qwen35.ssm.group_count", UINT32, 16)
    model = shape_of(b)
    memory = context_memory(model, ContextShape(65536, 2))
    assert set(memory.kv_by_layer) == {3, 7}
    assert memory.kv_bytes == 2 * (2 * 32768) * (2 * 256 * 2 * 2)
    assert set(memory.state_by_layer) == {0, 1, 2, 4, 5, 6}
    conv, state = 3 * (4096 + 2 * 16 * 128), 128 * 4096
    assert memory.state_bytes == 6 * 2 * (conv + state) * 4


def test_rwkv_and_lfm2_state_sizes(shape_of: Shape) -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "rwkv6")
    b.kv("rwkv6.block_count", UINT32, 2).kv("rwkv6.embedding_length", UINT32, 2048)
    b.kv("rwkv6.wkv.head_size", UINT32, 64)
    rwkv = shape_of(b).recurrent
    assert rwkv is not None and (rwkv.r_values, rwkv.s_values) == (2 * 2048, 2048 * 64)
    b = GGUFBuilder().kv("general.architecture", STRING, "lfm2")
    b.kv("lfm2.block_count", UINT32, 3).kv("lfm2.embedding_length", UINT32, 1024)
    b.kv("lfm2.attention.head_count", UINT32, 16).kv("lfm2.shortconv.l_cache", UINT32, 3)
    b.kv("lfm2.attention.head_count_kv", ARRAY, (UINT32, [0, 8, 0]))
    lfm = shape_of(b).recurrent
    assert lfm is not None and lfm.layers == (0, 2) and (lfm.r_values, lfm.s_values) == (2048, 0)


def test_falcon_h1_keeps_both_kv_and_state_on_every_layer(shape_of: Shape) -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "falcon-h1")
    b.kv("falcon-h1.block_count", UINT32, 2).kv("falcon-h1.embedding_length", UINT32, 1024)
    b.kv("falcon-h1.attention.head_count", UINT32, 8)
    b.kv("falcon-h1.attention.head_count_kv", UINT32, 2)
    b.kv("falcon-h1.ssm.conv_kernel", UINT32, 4).kv("falcon-h1.ssm.inner_size", UINT32, 2048)
    b.kv("falcon-h1.ssm.state_size", UINT32, 16)
    memory = context_memory(shape_of(b), ContextShape(4096, 1))
    assert set(memory.kv_by_layer) == set(memory.state_by_layer) == {0, 1}


def _no_window_drafter() -> GGUFBuilder:
    return gemma3_like(layers=6, window=0, name="drafter")


def test_drafter_kv_follows_the_targets_context(shape_of: Shape) -> None:
    # L-15: the server gives the draft context the target's -c and slots.
    target, drafter = shape_of(gemma3_like()), shape_of(_no_window_drafter())
    for ctx in (8192, 131072):
        request = BudgetRequest(target, ContextShape(ctx, 2), (HOST,), drafter=Drafter(drafter))
        budget = plan(request)
        own = context_memory(drafter, ContextShape(ctx, 2)).kv_bytes
        assert own == 6 * ctx * 1024  # every drafter layer caches the whole context
        host = budget.devices[0]
        assert host.drafter >= own + drafter.weights_bytes
    assert own / MIB == 768.0


def test_drafter_cache_types_are_its_own(shape_of: Shape) -> None:
    target, drafter = shape_of(gemma3_like()), shape_of(_no_window_drafter())
    f16 = plan(BudgetRequest(target, ContextShape(8192), (HOST,), drafter=Drafter(drafter)))
    q8 = plan(
        BudgetRequest(target, ContextShape(8192), (HOST,), drafter=Drafter(drafter, "q8_0", "q8_0"))
    )
    saved = 6 * 8192 * 2 * (512 - 272)
    # ... less Q converted to q8_0 for flash attention: 512 tokens x 4 heads x 256 dims.
    converted = 512 * (4 * 256 // 32) * 34
    assert f16.devices[0].drafter - q8.devices[0].drafter == saved - converted


def test_mtp_drafts_on_the_models_own_nextn_layers(shape_of: Shape) -> None:
    # L-12: the nextn layer is not in the main cache; draft-mtp caches it at the same -c.
    b = GGUFBuilder().kv("general.architecture", STRING, "glm4moe")
    b.kv("glm4moe.block_count", UINT32, 4).kv("glm4moe.nextn_predict_layers", UINT32, 1)
    b.kv("glm4moe.attention.head_count", UINT32, 8).kv("glm4moe.embedding_length", UINT32, 512)
    model = shape_of(b)
    shape = ContextShape(16384, 2)
    assert set(context_memory(model, shape).kv_by_layer) == {0, 1, 2}
    mtp = context_memory(model, shape, layers="mtp")
    assert mtp.kv_by_layer == {3: 8 * 64 * 2 * 2 * 16384}
    budget = plan(BudgetRequest(model, shape, (HOST,), drafter=Drafter(None)))
    assert budget.devices[0].drafter >= mtp.kv_bytes
    assert any("draft-mtp runs on the model's own nextn" in note for note in budget.notes)
    plain = plan(BudgetRequest(shape_of(gemma3_like()), shape, (HOST,), drafter=Drafter(None)))
    assert any("has none: the server will fail to load it" in n for n in plain.notes)


@needs_gemma
def test_real_gemma_shape() -> None:
    model = model_shape(inspect(GEMMA))
    assert (model.n_embd, model.n_ff, model.n_head, model.head_dim_k) == (640, 2048, 4, 256)
    assert (model.n_vocab, model.context_length, model.tied_output) == (262144, 32768, True)
    memory = context_memory(model, ContextShape(8192, 2))
    assert memory.kv_bytes / MIB == 24.0 + 30.0  # llama-server: 24.00 + 30.00 MiB
    quantized = context_memory(model, replace(ContextShape(16384, 4), cache_type_k="q8_0"))
    assert quantized.kv_bytes > 0
