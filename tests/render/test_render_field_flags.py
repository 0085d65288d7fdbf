"""The adapters' field-flag tables cannot drift from what the adapters emit.

Every flag a fully-dressed service's argv carries is declared in its
runtime's table (so it is refused in extra_args), and every llama.cpp
spelling in the table is one the REAL built llama-server lists in its own
``--help`` (L-42: the flags of the build we pin, not of a README).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_render_runtimes import argv_for

from inferfleet.install import runtime_flags
from inferfleet.runtimes import llamacpp
from inferfleet.runtimes.flags import FlagList, parse_args
from inferfleet.runtimes.registry import traits

TEMPLATE = {"chat_template_file": "t.jinja", "chat_template_kwargs": {"enable_thinking": False}}
DRESSED: dict[str, dict[str, Any]] = {
    "llama.cpp": {
        "runtime": "lcpp",
        "model": "m",
        "devices": ["g0", "g1"],
        "split_mode": "row",
        "tensor_split": [1, 1],
        "tensor_overrides": [{"pattern": "exps", "device": "CPU"}],
        "mmproj": "proj.gguf",
        "client": {"tools": True, "input": ["text", "image"]},
        "speculative": {
            "types": ["draft-simple"],
            "draft_model": "d",
            "draft_device": "g0",
            "draft_max": 8,
            "draft_min": 1,
            "draft_p_min": 0.5,
            "draft_kv_cache": {"k": "q8_0", "v": "q8_0"},
        },
        "jinja": True,
        **TEMPLATE,
    },
    "vllm": {
        "runtime": "vllm",
        "model": "hf",
        "devices": ["g0", "g1"],
        "gpu_memory_utilization": 0.9,
        "tensor_parallel": 2,
        "reasoning_parser": "qwen3",
        "tool_parser": "hermes",
        "client": {"tools": True},
        "speculative": {"types": ["ngram-simple"], "draft_max": 4},
        **TEMPLATE,
    },
    "sglang": {
        "runtime": "sgl",
        "model": "hf",
        "devices": ["g0"],
        "gpu_memory_utilization": 0.8,
        "reasoning_parser": "qwen3",
        "tool_parser": "qwen25",
        "client": {"tools": True, "input": ["text", "image"]},
        "speculative": {"types": ["draft-simple"], "draft_model": "d", "draft_max": 3},
        "chat_template_file": "t.jinja",
    },
}


@pytest.mark.parametrize("kind", sorted(DRESSED))
def test_every_flag_an_adapter_emits_is_in_its_table(kind: str, tmp_path: Path) -> None:
    (tmp_path / "t.jinja").write_text("{{ messages }}")
    table = traits(kind).flags
    argv = argv_for(tmp_path, **DRESSED[kind])
    program = len(traits(kind).container_program) if kind != "llama.cpp" else 1
    emitted = [a.flag for a in parse_args(argv[program:], table.takes) if a.flag is not None]
    assert len(emitted) >= 10
    undeclared = [f for f in emitted if table.field_of(f) is None]
    assert undeclared == [], f"{kind} emits flags its FlagTable does not declare"


def test_every_llamacpp_spelling_is_one_the_built_server_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llama_server_binary: Path
) -> None:
    binary = llama_server_binary
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    known = runtime_flags.read_flags(binary)
    assert isinstance(known, FlagList), known
    spellings = [s for f in llamacpp.FLAGS.fields for s in f.spellings]
    assert [s for s in spellings if known.takes(s) is None] == []
    for item in llamacpp.FLAGS.fields:
        for spelling in item.spellings:
            assert known.takes(spelling) == int(item.takes_value), spelling
    # The load modes the mmap rule knows are the ones this build documents (L-23).
    assert known.takes("--load-mode") == 1 and known.takes("--no-mmap") is None


def test_the_one_launch_refuses_a_field_flag(tmp_path: Path) -> None:
    """``up``/``apply``/``show`` take their launch from service_launch: it refuses (L-25)."""
    import json

    from test_render_runtimes import BASE

    from inferfleet.errors import UsageError
    from inferfleet.fleetfile.loader import parse_fleet
    from inferfleet.render.facts import facts_for
    from inferfleet.render.pipeline import service_launch

    spec = {"host": "box", "port": 9000, "ctx_per_slot": 4096, "runtime": "lcpp", "model": "m"}
    spec["extra_args"] = ["--seed", "1", "-np", "8"]
    text = BASE.replace("services: {}", "services:\n  s: " + json.dumps(spec))
    fleet = parse_fleet(text, tmp_path / "fleet.yaml")
    with pytest.raises(UsageError) as caught:
        service_launch(fleet, tmp_path, "s", facts_for(fleet)["box"])
    assert "service 's' sets -np in extra_args" in caught.value.message
    assert caught.value.hint == "use `services.s.parallel` (remove -np from extra_args)"
