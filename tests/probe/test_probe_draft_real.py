"""The probe reports a drafter's acceptance next to its decode rate (L-13, L-48).

The real llama-server with speculative decoding, the 270M test model drafting for
itself (the only model here): the server's own ``timings`` of each answer count the
drafted and the accepted tokens; the probe sums them. Without a drafter the check
is a skip (tests/probe/test_probe_real.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SELF_DRAFT = {"types": ["draft-simple"], "draft_model": "gemma3-270m", "draft_max": 4}


def test_the_probe_counts_the_drafters_accepted_tokens(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    with running_server(tmp_path / "server", speculative=SELF_DRAFT) as server:
        result = cli("probe", "gemma", "--file", str(server.fleet), "--json")
    doc = json.loads(result.stdout)
    checks = {c["id"]: c for c in doc["checks"]}
    draft = checks["draft"]
    assert draft["status"] == "pass", draft
    found = re.match(
        r"(\d+) of (\d+) drafted tokens accepted \((\d+)%\) at [\d.]+ tok/s", draft["summary"]
    )
    assert found is not None, draft["summary"]
    accepted, proposed = int(found[1]), int(found[2])
    assert 0 < accepted <= proposed
    assert '"draft_n"' in draft["evidence"][0]["answer"]
