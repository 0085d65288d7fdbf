"""L-30: the compute buffer grows with ``--ubatch-size``, measured on the real llama-server.

The same service is booted at two micro-batch sizes (b11434, CPU, the real
Gemma 3 270M), with and without flash attention. The server's own
``compute buffer size`` line is the measurement; ``inferfleet budget --json``
on a fleet whose ``extra_args`` carry that ``-ub`` is the prediction. The
budget must see the growth (direction), predict its size within 5%, and each
buffer within 1 MiB: a budget priced at the default micro-batch would send a
bigger one out of memory (L-30: re-measure after changing the batch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from budget_helpers import MIB, write_fleet
from test_budget_real_server import boot, pytestmark  # noqa: F401 - the real model and server fixtures

SMALL, LARGE = 128, 1024


def predicted_compute(cli: Any, tmp_path: Path, fa: str, ub: int) -> int:
    """The compute bytes ``inferfleet budget`` puts on the service's only device."""
    service = {"flash_attn": fa, "extra_args": ["-ub", str(ub)]}
    path = write_fleet(tmp_path, service)
    result = cli("budget", "svc", "-f", str(path), "--json")
    assert result.code == 0, result.stdout + result.stderr
    (entry,) = json.loads(result.stdout)["services"]
    assert entry["context"]["n_ubatch"] == ub  # the -ub in extra_args was read back
    (device,) = entry["devices"]
    compute: int = device["compute"]
    return compute


@pytest.mark.parametrize("fa", ["on", "off"])
def test_compute_buffer_tracks_the_micro_batch(cli: Any, tmp_path: Path, fa: str) -> None:
    measured, predicted = {}, {}
    for ub in (SMALL, LARGE):
        # The fleet's service: 4096 per slot x 2 slots, f16 cache (budget_helpers.write_fleet).
        report = boot(tmp_path / f"ub{ub}.jsonl", 8192, 2, "f16", "f16", fa, ub)
        measured[ub] = report.buffer_mib("compute")
        where = tmp_path / f"fleet{ub}"
        where.mkdir()
        predicted[ub] = predicted_compute(cli, where, fa, ub) / MIB
    grew = measured[LARGE] - measured[SMALL]
    assert grew > 0, measured  # the lesson itself: a bigger micro-batch, a bigger buffer
    predicted_growth = predicted[LARGE] - predicted[SMALL]
    assert predicted_growth > 0, predicted
    assert abs(predicted_growth - grew) / grew <= 0.05, (measured, predicted)
    for ub in (SMALL, LARGE):
        assert abs(predicted[ub] - measured[ub]) <= 1.0, (ub, measured, predicted)
