"""The budget against a real llama-server (b11434, CPU) on the real Gemma 3 270M.

For each shape the server is booted, asked for ``/health``, stopped cleanly
(SIGTERM, so it prints its memory breakdown) and its log parsed: every KV
cache the server allocates must match the prediction to the printed 0.01 MiB
(cells, layers and size), and model + context + compute must agree with the
server's memory breakdown within 5%.

``--fit off`` and ``--no-warmup`` keep a boot near 2 s: the fit's dry run
only adds a projection, and the breakdown printed at shutdown is what was
really allocated.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from budget_helpers import GEMMA, MIB
from helpers.real_model import llama_server

from inferfleet.budget import (
    BootReport,
    BudgetRequest,
    ContextShape,
    Target,
    context_memory,
    model_shape,
    parse_log,
    plan,
)
from inferfleet.gguf import inspect

# The real model and server, made once per machine (tests/helpers/real_model.py): never skipped.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("gemma_file", "llama_server_binary")]

# (-c, --parallel, -ctk, -ctv, -fa, -ub)
SHAPES = [
    (8192, 2, "f16", "f16", "auto", 512),
    (32768, 1, "f16", "f16", "off", 512),  # no flash attention: V transposed, KQ scores
    (16384, 4, "f16", "q8_0", "on", 512),  # L-20: quantized V needs flash attention
    (12288, 3, "q8_0", "q8_0", "on", 256),  # three slots, a smaller micro-batch
    (5000, 2, "q4_0", "q4_0", "on", 512),  # -c not a multiple of 256 x slots: padded
]


def boot(log: Path, ctx: int, parallel: int, k: str, v: str, fa: str, ub: int) -> BootReport:
    from helpers import free_port

    port = free_port()
    argv = [str(llama_server()), "-m", str(GEMMA), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-c", str(ctx), "--parallel", str(parallel), "-ctk", k, "-ctv", v, "-fa", fa]
    argv += ["-ub", str(ub), "--log-jsonl", "-lv", "4", "--fit", "off", "--no-warmup"]
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("llama-server did not become healthy in 120 s")
        proc.send_signal(signal.SIGTERM)  # a clean stop prints the memory breakdown
        proc.wait(30)
    finally:
        if proc.poll() is None:  # stopped by the pid we started (L-43)
            proc.kill()
            proc.wait(10)
    return parse_log(log)


@pytest.mark.parametrize(("ctx", "parallel", "k", "v", "fa", "ub"), SHAPES)
def test_budget_matches_llama_server(
    tmp_path: Path, ctx: int, parallel: int, k: str, v: str, fa: str, ub: int
) -> None:
    report = boot(tmp_path / "server.jsonl", ctx, parallel, k, v, fa, ub)
    model = model_shape(inspect(GEMMA))
    shape = ContextShape(ctx, parallel, k, v, flash_attn=fa != "off", n_ubatch=ub)
    memory = context_memory(model, shape)
    cells = memory.cells
    assert report.n_ctx == cells.n_ctx

    # Every KV cache exactly: cells, layers and size as the server prints them.
    full = [il for il, layer in enumerate(model.layout.layers) if layer.kind == "full"]
    swa = [il for il, layer in enumerate(model.layout.layers) if layer.kind == "swa"]
    predicted = sorted(
        (cache_cells, len(layers), round(sum(memory.kv_by_layer[il] for il in layers) / MIB, 2))
        for cache_cells, layers in ((cells.cells_full, full), (cells.cells_swa, swa))
    )
    reported = sorted((c.cells, c.layers, c.mib) for c in report.caches)
    assert reported == predicted
    assert round(memory.kv_bytes / MIB, 2) == round(report.kv_mib, 2)

    # Model + context + compute within 5% of the server's own breakdown (Host row).
    budget = plan(BudgetRequest(model, shape, (Target("cpu", "host", 8 << 30, "CPU"),)))
    device = budget.devices[0]
    breakdown = report.breakdown
    assert breakdown is not None and breakdown.phase == "loaded"
    host = breakdown.row("Host")
    assert host is not None
    assert host.context_mib == memory.kv_bytes // MIB  # the breakdown floors to MiB
    measured = host.model_mib + host.context_mib + host.compute_mib
    ours = (device.weights + device.kv + device.compute) / MIB
    assert abs(ours - measured) / measured <= 0.05, (ours, measured)
    assert abs(device.compute / MIB - report.buffer_mib("compute")) <= 1.0
