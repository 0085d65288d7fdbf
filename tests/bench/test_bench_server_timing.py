"""Server-Timing headers parsed by the spec (L-50)."""

from __future__ import annotations

import pytest

from inferfleet.client.server_timing import Metric, durations, parse


def test_L50_the_unit_is_in_the_parameter_half() -> None:
    # The incident: `ttft;dur=402.485` split on "=" first gives the name "ttft;dur".
    header = "ttft;dur=402.485"
    name, _, value = header.partition("=")
    assert (name, value) == ("ttft;dur", "402.485")  # what the broken parser looked up
    assert durations("ttft;dur=402.485") == {"ttft": 402.485}


def test_several_metrics_with_descriptions() -> None:
    header = 'queue;dur=3, prefill;dur=120.5;desc="prompt", decode;desc=gen;dur=900'
    assert parse(header) == {
        "queue": Metric("queue", 3.0, None),
        "prefill": Metric("prefill", 120.5, "prompt"),
        "decode": Metric("decode", 900.0, "gen"),
    }


def test_quoted_values_may_hold_commas_semicolons_and_escapes() -> None:
    header = 'db;desc="a, b; \\"c\\"";dur=1.5, cache;desc=hit'
    metrics = parse(header)
    assert metrics["db"] == Metric("db", 1.5, 'a, b; "c"')
    assert metrics["cache"] == Metric("cache", None, "hit")
    assert durations(header) == {"db": 1.5}


def test_several_header_values_names_case_and_first_wins() -> None:
    values = ["TTFT;DUR=10", "ttft;dur=20, total;dur=30"]
    assert durations(values) == {"ttft": 10.0, "total": 30.0}


@pytest.mark.parametrize(
    "header",
    ["", ";dur=3", "bad name;dur=1", "x;dur=fast", ",,,", 'x;dur="unterminated'],
)
def test_malformed_entries_are_skipped_not_fatal(header: str) -> None:
    assert durations(header) == {}


def test_a_missing_duration_is_not_zero() -> None:
    assert parse("miss") == {"miss": Metric("miss", None, None)}
