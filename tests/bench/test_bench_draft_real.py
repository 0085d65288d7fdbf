"""L-48: ``bench`` reports the draft acceptance the real llama-server measured.

An arm the bench starts itself runs the example service with speculative
decoding, the 270M test model drafting for itself (the only model here). The
acceptance the bench reports per level is the sum of llama-server's own
``draft_n_accepted`` over its ``draft_n`` (the ``timings`` of each answer),
request by request in ``requests.jsonl``; an arm without a drafter reports
none.

Mutation killed: the record not reading ``draft_n`` / ``draft_n_accepted``
from the server's timings (the level then has no draft figure).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port
from helpers.real_server import fleet_data, write_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELF_DRAFT = {"types": ["draft-simple"], "draft_model": "gemma3-270m", "draft_max": 4}


def test_L48_the_bench_reports_the_drafters_acceptance(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(free_port()))
    arms = tmp_path / "arms.yaml"
    drafted = {"service": "gemma", "set": {"speculative": SELF_DRAFT}}
    plain = {"service": "gemma"}
    arms.write_text(
        json.dumps(
            {"arms": [{"name": "plain", "start": plain}, {"name": "drafted", "start": drafted}]}
        )
    )
    out = tmp_path / "results"
    result = cli(
        "bench", "--arms", str(arms), "--file", str(fleet), "--api", "completions",
        "--prompt-ids", "two-cities", "--concurrency", "1", "--runs", "1",
        "--max-tokens", "128", "--out", str(out), "--json",
    )  # fmt: skip
    assert result.stdout, result.stderr
    doc = json.loads(result.stdout)
    assert doc["aborted"] is None, doc["aborted"]
    levels = {lv["arm"]: lv for lv in doc["levels"]}
    assert levels["plain"]["draft"] is None
    draft = levels["drafted"]["draft"]
    assert draft is not None and draft["proposed"] > 0, levels["drafted"]
    assert 0 < draft["accepted"] <= draft["proposed"]
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    mine = [r for r in records if r["arm"] == "drafted" and r["ok"]]
    assert mine and sum(r["draft_n"] for r in mine) == draft["proposed"]
    assert sum(r["draft_accepted"] for r in mine) == draft["accepted"]
    assert draft["acceptance"] == round(draft["accepted"] / draft["proposed"], 4)
    print(f"\nself-draft acceptance on real prose: {draft['acceptance']:.0%}")
