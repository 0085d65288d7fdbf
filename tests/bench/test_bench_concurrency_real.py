"""Concurrent streams against the real llama-server: really concurrent, and no collapse.

`bench_vs_reference` once showed inferfleet's requests at concurrency 8
decoding at 1.83 tok/s per stream against 11.65 for aiperf's. Measured
again with both clients in the same conditions, each got the same from the
server (2.6 and 2.1 tok/s at 8 streams on a busy 2-core host): the gap was
host contention between the two runs, not the client. This test keeps it
that way: at concurrency N within the server's slots, inferfleet's N
requests reach N different slots together, overlap end to end, and the
decode rate the server reports per stream does not collapse against one
stream alone; two streams together decode more than half of what one does
(L-53: per-stream and aggregate are different numbers).
"""

from __future__ import annotations

import re
import statistics

import pytest
from helpers.real_server import ALIAS, Running

from inferfleet.bench.battery import load_battery
from inferfleet.bench.runner import Endpoint, LevelResult, Load, request_extra, run_level, warm_up

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SLOTS = 2  # tests.helpers.real_server: 2 slots of 4096
TOKENS = 128  # L-49
# On 2 shared cores two batched streams each decode at well over half of one alone
# (aiperf's requests measured here: the same as inferfleet's); a client that sent the
# streams one after another, or that stalled the server, lands far below this.
MIN_PER_STREAM_SHARE = 0.25
LAUNCH = re.compile(r"launch_slot_: id +(\d+) \| task (\d+)")


def server_decode(level: LevelResult) -> float:
    rates = [r.server_decode_tps for r in level.records if r.server_decode_tps]
    assert len(rates) == len(level.records), [r.error for r in level.records]
    return statistics.median(rates)


def test_streams_within_the_slots_overlap_and_do_not_collapse(server: Running) -> None:
    prompts = sorted(load_battery().prompts, key=lambda p: len(p.text))[:SLOTS]
    endpoint = Endpoint(
        "real", server.url, ALIAS, "completions", "llama.cpp", request_extra("llama.cpp")
    )
    load = Load(max_tokens=TOKENS, timeout_s=600)
    warm_up(endpoint, prompts[0], timeout_s=600)
    one = run_level(endpoint, prompts, 1, run=1, load=load)
    start = server.log.stat().st_size
    two = run_level(endpoint, prompts, SLOTS, run=1, load=load)

    for level in (one, two):
        assert all(r.ok and r.completion_tokens == TOKENS for r in level.records)
        assert all(r.cached_tokens == 0 for r in level.records)  # L-47
    # The server saw both requests on different slots...
    launched = LAUNCH.findall(server.log.read_bytes()[start:].decode("utf-8", "replace"))
    assert len(launched) == SLOTS and len({slot for slot, _ in launched}) == SLOTS, launched
    # ...sent together, and in flight together from start to end.
    a, b = two.records
    assert abs(a.started_s - b.started_s) < 0.5, (a.started_s, b.started_s)
    assert min(a.finished_s, b.finished_s) > max(a.started_s, b.started_s)
    assert two.wall_s < 1.6 * max(r.e2e_ms for r in two.records) / 1e3

    alone, together = server_decode(one), server_decode(two)
    assert together >= MIN_PER_STREAM_SHARE * alone, (together, alone)
    # L-53: decode alone, prefill left out, two streams deliver more than half of one.
    assert two.decode_aggregate_tps is not None and one.decode_aggregate_tps is not None
    assert two.decode_aggregate_tps > 0.5 * alone, (two.decode_aggregate_tps, alone)
    print(
        f"server decode per stream: 1 stream {alone:.2f}, {SLOTS} streams {together:.2f};"
        f" decode-only aggregate {one.decode_aggregate_tps} -> {two.decode_aggregate_tps}"
    )
