"""benchmarks/bench_vs_reference.py reads the server's truth from llama-server's own log.

The lines are llama-server's as written with ``--log-timestamps`` (minutes,
seconds, ms, us since start): which slots served the measured requests, how
far apart they started, each one's timings, and the decode-only aggregate
rate (tokens decoded over the time at least one request decoded, L-53).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_vs_reference as vs  # noqa: E402

LOG = """\
0.13.921.417 I slot print_timing: id  7 | task 0 |        eval time =    5519.78 ms /     8 tokens (  788.54 ms per token,     1.27 tokens per second)
1.00.000.000 I slot launch_slot_: id  0 | task 10 | processing task, is_child = 0
1.00.500.000 I slot launch_slot_: id  1 | task 11 | processing task, is_child = 0
1.10.000.000 I slot print_timing: id  0 | task 10 | prompt eval time =    4000.00 ms /   250 tokens (   16.00 ms per token,    62.50 tokens per second)
1.10.000.000 I slot print_timing: id  0 | task 10 |        eval time =    5000.00 ms /   100 tokens (   50.00 ms per token,    20.00 tokens per second)
1.10.000.100 I slot      release: id  0 | task 10 | stop processing: n_tokens = 350, truncated = 0
1.12.000.000 I slot print_timing: id  1 | task 11 | prompt eval time =    6000.00 ms /   500 tokens (   12.00 ms per token,    83.33 tokens per second)
1.12.000.000 I slot print_timing: id  1 | task 11 |        eval time =    4000.00 ms /   100 tokens (   40.00 ms per token,    25.00 tokens per second)
1.12.000.100 I slot      release: id  1 | task 11 | stop processing: n_tokens = 600, truncated = 0
"""  # noqa: E501 - llama-server's lines, verbatim


def test_server_truth_from_a_timestamped_log(tmp_path: Path) -> None:
    log = tmp_path / "llama-server.log"
    log.write_text(LOG)
    start = LOG.index("1.00.000.000")  # the warm-up's line before it stays out
    truth = vs.server_truth(log, start)
    assert truth["requests"] == 2
    assert truth["slots_used"] == 2
    assert truth["slot_start_spread_s"] == pytest.approx(0.5)
    assert truth["decode_tps_median"] == pytest.approx(22.5)
    # Decoding over [65.0001, 70.0001] and [68.0001, 72.0001]: 200 tokens in 7 s.
    assert truth["decode_only_aggregate_tps"] == pytest.approx(200 / 7, rel=1e-3)


def test_decode_only_rate_leaves_idle_gaps_out_and_has_no_figure_for_nothing() -> None:
    assert vs.decode_only_rate([(0.0, 1.0, 10), (3.0, 4.0, 10)]) == pytest.approx(10.0)
    assert vs.decode_only_rate([(0.0, 2.0, 10), (0.5, 1.0, 10)]) == pytest.approx(10.0)
    assert vs.decode_only_rate([]) is None


def test_a_log_without_timestamps_still_gives_the_timings(tmp_path: Path) -> None:
    log = tmp_path / "llama-server.log"
    plain = "\n".join(line.split(" ", 1)[1] for line in LOG.splitlines()[1:]) + "\n"
    log.write_text(plain)
    truth = vs.server_truth(log, 0)
    assert truth["requests"] == 2 and truth["decode_tps_median"] == pytest.approx(22.5)
    assert truth["slots_used"] == 0 and truth["slot_start_spread_s"] is None
    assert truth["decode_only_aggregate_tps"] is None
