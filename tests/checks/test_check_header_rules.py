"""Rules that read GGUF headers, with real files built byte by byte.

Each test writes tiny GGUFs (tests/fixtures/gguf_builder.py) where the
fleet's model source points, so the rule reads the header through the same
reader the CLI uses; without the file the rule is skipped with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from check_helpers import Patch, check
from fixtures.gguf_builder import F16, Q4_K, Q8_0, STRING, UINT32, GGUFBuilder

HEADER_RULES = {
    "gguf-unknown-types",
    "spec-mtp-without-nextn",
    "spec-drafter-full-window",
    "override-matches-no-tensor",
    "chat-template-missing",
    "context-beyond-training",
}
S = "services"


def model(
    *,
    layers: int = 4,
    nextn: int = 0,
    window: int | None = None,
    template: bool = True,
    context: int = 32768,
    odd_type: int | None = None,
) -> GGUFBuilder:
    """A small llama-shaped file: 8 heads, 2 KV heads, head dim 64."""
    b = GGUFBuilder()
    b.kv("general.architecture", STRING, "llama").kv("llama.block_count", UINT32, layers)
    b.kv("llama.context_length", UINT32, context).kv("llama.embedding_length", UINT32, 512)
    b.kv("llama.attention.head_count", UINT32, 8).kv("llama.attention.head_count_kv", UINT32, 2)
    if nextn:
        b.kv("llama.nextn_predict_layers", UINT32, nextn)
    if window is not None:
        b.kv("llama.attention.sliding_window", UINT32, window)
    if template:
        b.kv("tokenizer.chat_template", STRING, "{{ messages }}")
    b.tensor("token_embd.weight", (512, 64), Q8_0)
    for il in range(layers):
        b.tensor(f"blk.{il}.attn_k.weight", (512, 128), F16)
        b.tensor(f"blk.{il}.ffn_up_exps.weight", (512, 256), Q4_K)
    if odd_type is not None:
        b.tensor("blk.0.custom.weight", (32,), odd_type, n_bytes=32)
    return b


def run(
    tmp_path: Path, patch: Patch, target: GGUFBuilder, drafter: GGUFBuilder | None = None
) -> Any:
    models = tmp_path / "models"
    (models / "m").mkdir(parents=True)
    (models / "d").mkdir()
    target.write(models / "m" / "m.gguf", data=False)
    if drafter is not None:
        drafter.write(models / "d" / "d.gguf", data=False)
    where = {
        "models.m.source": {"path": str(models / "m")},
        "models.d.source": {"path": str(models / "d")},
    }
    return check(tmp_path, {**where, **patch})


def hits(report: Any, rule: str) -> list[Any]:
    return [f for f in report.findings if f.rule == rule]


def test_unknown_tensor_type_is_reported_by_number(tmp_path: Path) -> None:
    """L-10: a fork's type id 103 only loads in that fork."""
    (hit,) = hits(run(tmp_path / "a", {}, model(odd_type=103)), "gguf-unknown-types")
    assert "103" in hit.message and hit.field == "services.chat.model"
    assert not hits(run(tmp_path / "b", {}, model()), "gguf-unknown-types")


def test_mtp_needs_nextn_layers_in_the_file(tmp_path: Path) -> None:
    """L-12: MTP is a property of the file, not of flags."""
    mtp = {f"{S}.chat.speculative": {"types": ["draft-mtp"]}}
    (hit,) = hits(run(tmp_path / "a", mtp, model()), "spec-mtp-without-nextn")
    assert "no nextn layers" in hit.message
    assert not hits(run(tmp_path / "b", mtp, model(nextn=1)), "spec-mtp-without-nextn")
    # An MTP drafter file: its own nextn layers count, not the target's.
    with_drafter = {f"{S}.chat.speculative": {"types": ["draft-mtp"], "draft_model": "d"}}
    report = run(tmp_path / "c", with_drafter, model(nextn=1), drafter=model(layers=1))
    assert hits(report, "spec-mtp-without-nextn")


def test_drafter_without_sliding_window_caches_the_target_window(tmp_path: Path) -> None:
    """L-15: the drafter's KV follows the target's context."""
    spec = {
        f"{S}.chat.speculative": {"types": ["draft-simple"], "draft_model": "d"},
        f"{S}.chat.ctx_per_slot": 131072,
    }
    (hit,) = hits(
        run(tmp_path / "a", spec, model(), drafter=model(layers=2)), "spec-drafter-full-window"
    )
    assert hit.severity == "warning" and "262144 tokens" in hit.message and "MiB" in hit.message
    windowed = run(tmp_path / "b", spec, model(), drafter=model(layers=2, window=4096))
    assert not hits(windowed, "spec-drafter-full-window")


def test_override_that_matches_no_tensor(tmp_path: Path) -> None:
    """L-17: a pattern matching nothing silently does nothing."""
    nothing = {f"{S}.chat.tensor_overrides": [{"pattern": r"blk\.99\.ffn_up_exps"}]}
    (hit,) = hits(run(tmp_path / "a", nothing, model()), "override-matches-no-tensor")
    assert "matches none of the 9 tensors" in hit.message
    fine = {f"{S}.chat.tensor_overrides": [{"pattern": r"blk\.[23]\.ffn_up_exps"}]}
    assert not hits(run(tmp_path / "b", fine, model()), "override-matches-no-tensor")


def test_shadowing_is_exact_with_the_header(tmp_path: Path) -> None:
    """First match wins: with the file's tensor names the check is exact, not a guess."""
    base = {f"{S}.chat.devices": ["g0", "g1"], f"{S}.chat.split_mode": "row"}
    shadowed = {
        **base,
        f"{S}.chat.tensor_overrides": [
            {"pattern": "ffn_up_exps", "device": "g0"},
            {"pattern": r"blk\.3\.ffn", "device": "g1"},
        ],
    }
    (hit,) = hits(run(tmp_path / "a", shadowed, model()), "override-shadowed")
    assert "every tensor it matches" in hit.message
    # blk.3 also has attn_k, which the broad pattern does not take: not fully shadowed.
    partial = {
        **base,
        f"{S}.chat.tensor_overrides": [
            {"pattern": "ffn_up_exps", "device": "g0"},
            {"pattern": r"blk\.3\.", "device": "g1"},
        ],
    }
    assert not hits(run(tmp_path / "b", partial, model()), "override-shadowed")


def test_chat_on_a_file_without_template(tmp_path: Path) -> None:
    """L-19: no template in the file and none given: the server falls back to a built-in."""
    (hit,) = hits(run(tmp_path / "a", {}, model(template=False)), "chat-template-missing")
    assert "chat_template_file" in hit.hint
    assert not hits(run(tmp_path / "b", {}, model()), "chat-template-missing")
    completion = {f"{S}.chat.client": {"chat": False}}
    assert not hits(run(tmp_path / "c", completion, model(template=False)), "chat-template-missing")


def test_window_beyond_training(tmp_path: Path) -> None:
    long = {f"{S}.chat.ctx_per_slot": 65536}
    (hit,) = hits(run(tmp_path / "a", long, model(context=32768)), "context-beyond-training")
    assert hit.severity == "warning" and "32768" in hit.message
    assert not hits(run(tmp_path / "b", {}, model(context=32768)), "context-beyond-training")


def test_header_rules_skip_with_the_reason_when_the_file_is_absent(tmp_path: Path) -> None:
    report = check(tmp_path, {f"{S}.chat.speculative": {"types": ["draft-mtp"]}})
    skipped = {s.rule: s for s in report.skipped}
    assert set(skipped) >= {"gguf-unknown-types", "spec-mtp-without-nextn", "chat-template-missing"}
    assert "'m' is not on this machine" in skipped["spec-mtp-without-nextn"].reason
    assert report.findings == []


def test_safetensors_models_are_not_read_as_gguf(tmp_path: Path) -> None:
    report = check(tmp_path, {f"{S}.serve.speculative": {"types": ["draft-mtp"]}})
    # vllm-kv-capacity reads the folder's config.json instead (and skips: it is not here).
    (skip,) = [s for s in report.skipped if s.subject == "serve" and s.rule != "vllm-kv-capacity"]
    assert "is not a GGUF" in skip.reason


def test_unreadable_header_is_a_skip_with_the_reader_message(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "m"
    folder.mkdir(parents=True)
    (folder / "m.gguf").write_bytes(b"NOPE" + b"\0" * 64)
    report = check(tmp_path, {"models.m.source": {"path": str(folder)}})
    reasons = {s.reason for s in report.skipped}
    assert any("header unreadable" in r for r in reasons)


# The operator's shape (L-17): -ts 1,1 over two cards, blocks 0-4 pinned to the
# first card and 45-47 to the second (the cards that own those layers anyway),
# the other experts on CPU. 48 blocks + output = 49 slots, split at 0.5: blocks
# 0-24 on g0, 25-47 on g1.
LAYER_SPLIT = {f"{S}.chat.devices": ["g0", "g1"], f"{S}.chat.tensor_split": [1, 1]}
OWN_BLOCKS = [
    {"pattern": r"blk\.([0-4])\.ffn_.*_exps", "device": "g0"},
    {"pattern": r"blk\.(4[5-7])\.ffn_.*_exps", "device": "g1"},
    {"pattern": "exps", "device": "CPU"},
]


def test_blocks_pinned_to_the_card_that_owns_them_pass(tmp_path: Path) -> None:
    patch = {**LAYER_SPLIT, f"{S}.chat.tensor_overrides": OWN_BLOCKS}
    report = run(tmp_path, patch, model(layers=48))
    assert not hits(report, "override-gpu-target-layer-split"), report.findings
    assert not [s for s in report.skipped if s.rule == "override-gpu-target-layer-split"]


def test_a_block_sent_to_the_card_that_does_not_own_it_is_refused(tmp_path: Path) -> None:
    foreign = [{"pattern": r"blk\.(4[5-7])\.ffn_.*_exps", "device": "g0"}, OWN_BLOCKS[2]]
    report = run(tmp_path, {**LAYER_SPLIT, f"{S}.chat.tensor_overrides": foreign}, model(layers=48))
    (hit,) = hits(report, "override-gpu-target-layer-split")
    assert hit.severity == "error" and hit.field == "services.chat.tensor_overrides[0].device"
    assert "blk.45 (owned by g1), blk.46 (owned by g1), blk.47 (owned by g1)" in hit.message
    # A shifted split moves the boundary: with 3:1 blocks 0-36 are g0's, so 45-47 stay g1's.
    shifted = {**LAYER_SPLIT, f"{S}.chat.tensor_split": [3, 1]}
    pinned = run(
        tmp_path / "b", {**shifted, f"{S}.chat.tensor_overrides": OWN_BLOCKS}, model(layers=48)
    )
    assert not hits(pinned, "override-gpu-target-layer-split")


def test_an_unrestricted_gpu_override_fires_without_the_header(tmp_path: Path) -> None:
    """`exps` to one card on a layer split moves the other card's blocks (the incident)."""
    everything = [{"pattern": "exps", "device": "g1"}]
    report = check(tmp_path, {**LAYER_SPLIT, f"{S}.chat.tensor_overrides": everything})
    (hit,) = hits(report, "override-gpu-target-layer-split")
    assert "any block the other devices own" in hit.message


def test_pinned_blocks_without_the_header_are_skipped_with_the_reason(tmp_path: Path) -> None:
    report = check(tmp_path, {**LAYER_SPLIT, f"{S}.chat.tensor_overrides": OWN_BLOCKS})
    assert not hits(report, "override-gpu-target-layer-split")
    skips = [s for s in report.skipped if s.rule == "override-gpu-target-layer-split"]
    assert [s.reason.split(":")[0] for s in skips] == [
        "which card owns blocks 0-4",
        "which card owns blocks 45-47",
    ]
    assert "is not on this machine" in skips[0].reason
