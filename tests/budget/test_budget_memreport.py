"""llama-server's memory report, parsed from captured logs (b11434, the real model),
and the two-boot solve of non-KV cost (L-27)."""

from __future__ import annotations

import json

import pytest
from budget_helpers import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferfleet.budget import BootPoint, BudgetError, fit_one, fit_two, parse_lines, parse_log

JSONL = DATA / "llama-server-b11434-gemma3-c8192-np2.jsonl"
TEXT = DATA / "llama-server-b11434-gemma3-c4096-q8_0.log"


def test_jsonl_log_of_a_real_boot() -> None:
    report = parse_log(JSONL)
    # --fit's dry run projects the load, the clean shutdown reports what was allocated.
    assert [b.phase for b in report.breakdowns] == ["projected", "loaded"]
    projected, loaded = report.breakdowns
    assert projected.row("Host") is not None and projected.row("Host").model_mib == 222  # type: ignore[union-attr]
    host = loaded.row("Host")
    assert host is not None
    assert (host.self_mib, host.model_mib, host.context_mib, host.compute_mib) == (312, 235, 54, 23)
    assert loaded.row("CPU_REPACK") is not None and report.breakdown is loaded
    assert [(c.mib, c.cells, c.layers, c.seqs, c.k_type, c.v_type) for c in report.caches] == [
        (24.0, 4096, 3, 2, "f16", "f16"),
        (30.0, 1024, 15, 2, "f16", "f16"),
    ]
    assert report.kv_mib == 54.0
    assert report.buffer_mib("model", "CPU_Mapped") == 235.16
    assert report.buffer_mib("model") == 235.16 + 12.66
    assert report.buffer_mib("compute") == 23.28 and report.buffer_mib("output") == 2.0
    assert (report.n_ctx, report.n_seq_max, report.n_ubatch) == (8192, 2, 512)
    assert report.flash_attn is True and report.skipped_lines == 0


def test_text_log_without_jsonl() -> None:
    report = parse_log(TEXT)
    assert [b.phase for b in report.breakdowns] == ["projected", "loaded"]
    host = report.breakdowns[-1].row("Host")
    assert host is not None and (host.self_mib, host.model_mib, host.context_mib) == (273, 235, 14)
    assert [c.k_type for c in report.caches] == ["q8_0", "q8_0"]
    assert round(report.kv_mib, 2) == 6.38 + 7.97
    assert report.n_ctx == 4096 and report.buffer_mib("compute") == 23.81


def test_device_rows_of_a_gpu_server() -> None:
    # common/fit.cpp's device template: total = free + (self = model + context + compute) + rest.
    lines = [
        "load_model: loading model '/m/big.gguf'",
        "load_tensors:        CUDA0 model buffer size = 20000.00 MiB",
        "common_memory_breakdown_print: |   - CUDA0 (RTX 3090)   | 24135 = 1500 + "
        "(22100 = 20000 +    1600 +     500) +         535 |",
        "common_memory_breakdown_print: |   - Host               |                  "
        "   700 =   650 +       0 +      50                |",
    ]
    report = parse_lines(lines)
    rows = report.breakdowns[-1].rows
    assert [(r.kind, r.name, r.self_mib, r.total_mib, r.free_mib) for r in rows] == [
        ("device", "CUDA0", 22100, 24135, 1500),
        ("host", "Host", 700, None, None),
    ]
    assert report.breakdowns[-1].phase == "loaded"


def test_the_last_boot_of_an_appended_log_wins() -> None:
    first = JSONL.read_text().splitlines()
    second = TEXT.read_text().splitlines()
    report = parse_lines([*first, *second])
    assert report.n_ctx == 4096 and len(report.caches) == 2


def test_malformed_lines_are_skipped_and_counted() -> None:
    event = {"type": "fit_memory_breakdown", "data": {"rows": [{"kind": "host", "self": "x"}]}}
    lines = ["{not json", json.dumps(event), "[1, 2]", *JSONL.read_text().splitlines()]
    report = parse_lines(lines)
    assert report.skipped_lines == 2  # "[1, 2]" is not an event: a text line without a report
    assert report.breakdown is not None and report.breakdown.row("Host") is not None


def test_a_log_without_a_memory_report_says_which_flags_give_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "server.log"
    path.write_text("srv  update_slots: all slots are idle\n")
    with pytest.raises(BudgetError, match="no llama-server memory report") as info:
        parse_log(path)
    assert "--log-jsonl" in info.value.hint
    with pytest.raises(BudgetError, match="cannot read the log"):
        parse_log(tmp_path / "missing.log")


_FRAGMENTS = [
    "llama_kv_cache: size = ",
    " MiB (",
    " cells, ",
    " layers, ",
    "/2 seqs), K (f16): ",
    "CPU KV buffer size = ",
    "common_memory_breakdown_print: |   - Host | ",
    " = ",
    " + (",
    '{"type":"fit_memory_breakdown","data":{"rows":[',
    '{"kind":"device","name":"CUDA0","self":',
    "llama_context: n_ctx = ",
    "load_tensors: ",
    "load_model: loading model",
    "}]}}",
]


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.sampled_from(_FRAGMENTS),
                st.integers(-5, 10**12).map(str),
                st.text(max_size=12),
            ),
            max_size=12,
        ).map("".join),
        max_size=20,
    )
)
def test_hostile_logs_never_crash_the_parser(lines: list[str]) -> None:
    try:
        report = parse_lines(lines)
    except BudgetError:
        return
    assert report.skipped_lines >= 0


def test_two_boots_fix_the_non_kv_line_exactly() -> None:
    # nonKV(c) = 300 MiB + 2 KiB per token of -c.
    a = BootPoint(8192, 300 * (1 << 20) + 2048 * 8192)
    b = BootPoint(65536, 300 * (1 << 20) + 2048 * 65536)
    fit = fit_two(a, b)
    assert fit.at(0) == 300 * (1 << 20) and fit.at(131072) == 300 * (1 << 20) + 2048 * 131072
    assert fit.source == "two boots"
    flat = fit_two(b, BootPoint(131072, b.non_kv - 1))
    assert flat.slope == 0 and "flat" in flat.source
    with pytest.raises(BudgetError, match="two different contexts"):
        fit_two(a, a)
    one = fit_one(a, 2048.0)
    assert one.at(65536) == b.non_kv and one.source == "one boot + estimated slope"
