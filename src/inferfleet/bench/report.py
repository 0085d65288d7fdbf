"""The markdown report and the CSV table of a benchmark summary."""

from __future__ import annotations

import csv
import io
from typing import Any

from inferfleet.documents import BenchDocument

PLOTS = (
    ("rate_by_concurrency.png", "Per-stream and aggregate output rate by concurrency"),
    ("ttft_distribution.png", "Time to first token, distribution"),
    ("arm_comparison.png", "Arms compared (median, p10-p90)"),
)

CSV_COLUMNS = (
    "arm",
    "concurrency",
    "requests",
    "ok",
    "decode_tps_median",
    "decode_tps_p10",
    "decode_tps_p90",
    "aggregate_tps_median",
    "decode_aggregate_tps_median",
    "ttft_ms_median",
    "ttft_ms_p90",
    "ttfc_ms_median",
    "ttft_content_ms_median",
    "prefill_tps_median",
    "queue_ms_median",
    "server_wait_ms_median",
    "server_decode_tps_median",
    "server_prefill_tps_median",
    "decode_error_pct_max",
    "prefill_error_pct_max",
    "tokens_per_chunk_median",
    "cache_hits",
    "max_cached_tokens",
    "short_generations",
    "reasoning_only",
    "draft_acceptance",
)


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _spread(s: dict[str, Any], digits: int = 1) -> str:
    if not s or s.get("median") is None:
        return "-"
    return f"{_num(s['median'], digits)} ({_num(s['p10'], digits)}-{_num(s['p90'], digits)})"


def csv_text(summary: BenchDocument) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for lv in summary["levels"]:
        writer.writerow(
            [
                lv["arm"],
                lv["concurrency"],
                lv["requests"],
                lv["ok"],
                lv["decode_tps"]["median"],
                lv["decode_tps"]["p10"],
                lv["decode_tps"]["p90"],
                lv["aggregate_tps"]["median"],
                lv["decode_aggregate_tps"]["median"],
                lv["ttft_ms"]["median"],
                lv["ttft_ms"]["p90"],
                lv["ttfc_ms"]["median"],
                lv["ttft_content_ms"]["median"],
                lv["prefill_tps"]["median"],
                lv["queue_ms"]["median"],
                lv["server_wait_ms"]["median"],
                lv["server_decode_tps"]["median"],
                lv["server_prefill_tps"]["median"],
                lv["decode_error_pct"]["max"],
                lv["prefill_error_pct"]["max"],
                lv["tokens_per_chunk"]["median"],
                lv["cache"]["hits"],
                lv["cache"]["max_cached_tokens"],
                lv["short_generations"],
                lv["reasoning_only"],
                (lv.get("draft") or {}).get("acceptance"),
            ]
        )
    return buffer.getvalue()


def markdown(summary: BenchDocument, *, plots: list[str], plots_note: str | None = None) -> str:
    o = summary["options"]
    lines = [
        f"# Benchmark {summary['started_at']}",
        "",
        f"inferfleet {summary['inferfleet']}, {summary['host']['cpus']} CPUs; battery "
        f"`{summary['battery']['name']}` v{summary['battery']['version']} "
        f"({len(summary['battery']['prompts'])} of its real prompts, salted per request); "
        f"`{o['api']}` API, max_tokens {o['max_tokens']}"
        f"{' with ignore_eos' if o['ignore_eos'] else ''}; concurrency "
        f"{', '.join(map(str, o['concurrency']))}; {o['runs']} run(s).",
        "",
    ]
    if summary.get("aborted"):
        lines += [f"**Stopped early:** {summary['aborted']}", ""]
    lines += ["## Arms", "", "| arm | kind | endpoint | model | runtime |", "|---|---|---|---|---|"]
    for arm in summary["arms"]:
        lines.append(
            f"| {arm['name']} | {arm['kind']} | {arm['url']} | {arm['model'] or '-'} | "
            f"{arm['runtime'] or '-'} |"
        )
    lines += [
        "",
        "## Results",
        "",
        "Median (p10-p90). Per-stream decode is what one client sees; aggregate is all streams "
        "together (L-53). Token counts are the server's own (L-51); decode statistics use only "
        f"generations of at least {o['min_decode_tokens']} tokens (L-49). Queue is the client's "
        "own time from taking a request to sending it, kept out of every latency.",
        "",
        "| arm | conc. | ok | decode tok/s per stream | aggregate tok/s | "
        "decode-only aggregate tok/s | TTFT ms | prefill tok/s | queue ms | cached tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for lv in summary["levels"]:
        cache = lv["cache"]
        cached = (
            "0" if not cache["hits"] else f"{cache['hits']} hits, max {cache['max_cached_tokens']}"
        )
        if cache["reported"] == 0:
            cached = "not reported"
        lines.append(
            f"| {lv['arm']} | {lv['concurrency']} | {lv['ok']}/{lv['requests']} | "
            f"{_spread(lv['decode_tps'])} | {_spread(lv['aggregate_tps'])} | "
            f"{_spread(lv['decode_aggregate_tps'])} | {_spread(lv['ttft_ms'], 0)} | "
            f"{_spread(lv['prefill_tps'])} | "
            f"{_spread(lv['queue_ms'], 2)} | {cached} |"
        )
    if summary["comparisons"]:
        lines += [
            "",
            "## Comparisons",
            "",
            "Medians of the per-run medians; noise is the larger run-to-run range of the two "
            "arms. A difference is called only beyond the noise (L-48).",
            "",
            "| conc. | metric | a | b | median a | median b | b vs a | noise | verdict |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in summary["comparisons"]:
            diff = "-" if c["diff_pct"] is None else f"{c['diff_pct']:+.1f}%"
            noise = "-" if c["noise_pct"] is None else f"{c['noise_pct']:.1f}%"
            lines.append(
                f"| {c['concurrency']} | {c['metric']} | {c['a']} | {c['b']} | "
                f"{_num(c['median_a'])} | {_num(c['median_b'])} | {diff} | {noise} | "
                f"{c['verdict']} |"
            )
    with_server = [lv for lv in summary["levels"] if lv["server_decode_tps"]["n"]]
    if with_server:
        lines += [
            "",
            "## Client clock against the server's own timings",
            "",
            "Relative difference per request between the benchmark's rates (client clock, "
            "server counts) and the rates the server reports. Prefill is timed from the "
            "server's prompt-start event where it sends one (llama.cpp), else from the send, "
            "and then also holds the server wait (HTTP, tokenizing, queueing for a slot).",
            "",
            "| arm | conc. | decode: median / max % | prefill: median / max % | server wait ms |",
            "|---|---|---|---|---|",
        ]
        for lv in with_server:
            d, p = lv["decode_error_pct"], lv["prefill_error_pct"]
            lines.append(
                f"| {lv['arm']} | {lv['concurrency']} | {_num(d['median'], 2)} / "
                f"{_num(d['max'], 2)} | {_num(p['median'], 2)} / {_num(p['max'], 2)} | "
                f"{_spread(lv['server_wait_ms'], 0)} |"
            )
    cache = summary["cache"]
    lines += [
        "",
        "## Prefix cache (L-47)",
        "",
        f"{cache['reported']} of {cache['requests']} answers reported a cached-token count; "
        f"{cache['hits']} had cached tokens"
        + (f" (max {cache['max_cached_tokens']})." if cache["hits"] else "."),
    ]
    if plots_note:
        lines += ["", "## Plots", "", plots_note]
    if plots:
        lines += ["", "## Plots", ""]
        for name, caption in PLOTS:
            if name in plots:
                lines += [f"![{caption}](plots/{name})", ""]
    return "\n".join(lines).rstrip() + "\n"
