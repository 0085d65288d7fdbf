"""PNG plots of a benchmark, drawn with matplotlib's Agg backend (no display).

matplotlib is the optional ``bench`` extra: hosts that only ``apply`` do not carry
it, and a bench without it still measures and writes every figure; only the PNGs
are skipped, and the report says how to get them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inferfleet.bench.measure import RequestRecord
from inferfleet.documents import BenchDocument

INSTALL_HINT = "pip install 'inferfleet[bench]' (or: pip install matplotlib)"
SKIPPED = "plots skipped: matplotlib is not installed (pip install 'inferfleet[bench]')"


def pyplot() -> Any | None:
    """matplotlib's pyplot on the Agg backend, or None when matplotlib cannot be imported."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")  # before pyplot: a CLI must never need a display
    import matplotlib.pyplot as plt

    return plt


def _arms(summary: BenchDocument) -> list[str]:
    return [a["name"] for a in summary["arms"]]


def rate_by_concurrency(plt: Any, summary: BenchDocument, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for arm in _arms(summary):
        levels = sorted(
            (lv for lv in summary["levels"] if lv["arm"] == arm), key=lambda lv: lv["concurrency"]
        )
        xs = [lv["concurrency"] for lv in levels]
        per_stream = [lv["decode_tps"]["median"] for lv in levels]
        aggregate = [lv["aggregate_tps"]["median"] for lv in levels]
        (line,) = ax.plot(xs, per_stream, marker="o", label=f"{arm}: per stream")
        ax.plot(
            xs, aggregate, marker="s", linestyle="--", color=line.get_color(), label=f"{arm}: all"
        )
    ax.set_xlabel("concurrent streams")
    ax.set_ylabel("output tokens / s")
    ax.set_title("Output rate: per stream vs aggregate (L-53)")
    ax.set_xticks(sorted({lv["concurrency"] for lv in summary["levels"]}))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def ttft_distribution(
    plt: Any, records: list[RequestRecord], summary: BenchDocument, path: Path
) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for arm in _arms(summary):
        for c in summary["options"]["concurrency"]:
            values = sorted(
                r.ttft_ms
                for r in records
                if r.ok and r.arm == arm and r.concurrency == c and r.ttft_ms is not None
            )
            if not values:
                continue
            fractions = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, fractions, where="post", label=f"{arm}, c={c}")
    ax.set_xlabel("time to first token (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("Time to first token (empirical CDF)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def arm_comparison(plt: Any, summary: BenchDocument, path: Path) -> None:
    arms = _arms(summary)
    levels = summary["options"]["concurrency"]
    by_key = {(lv["arm"], lv["concurrency"]): lv for lv in summary["levels"]}
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), dpi=110)
    width = 0.8 / max(1, len(arms))
    for panel, (metric, label) in zip(
        axes, (("decode_tps", "per-stream decode tok/s"), ("ttft_ms", "TTFT ms")), strict=True
    ):
        for i, arm in enumerate(arms):
            xs, mids, lows, highs = [], [], [], []
            for j, c in enumerate(levels):
                lv = by_key.get((arm, c))
                spread = lv[metric] if lv else None
                if not spread or spread["median"] is None:
                    continue
                xs.append(j + i * width)
                mids.append(spread["median"])
                lows.append(spread["median"] - spread["p10"])
                highs.append(spread["p90"] - spread["median"])
            panel.bar(xs, mids, width=width, yerr=[lows, highs], capsize=3, label=arm)
        panel.set_xticks([j + width * (len(arms) - 1) / 2 for j in range(len(levels))])
        panel.set_xticklabels([f"c={c}" for c in levels])
        panel.set_ylabel(label)
        panel.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Arms compared: median with p10-p90")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def draw_all(records: list[RequestRecord], summary: BenchDocument, folder: Path) -> list[str]:
    """The plots drawn into ``folder`` (none when matplotlib is missing: :data:`SKIPPED`)."""
    plt = pyplot()
    if plt is None:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    rate_by_concurrency(plt, summary, folder / "rate_by_concurrency.png")
    ttft_distribution(plt, records, summary, folder / "ttft_distribution.png")
    arm_comparison(plt, summary, folder / "arm_comparison.png")
    return ["rate_by_concurrency.png", "ttft_distribution.png", "arm_comparison.png"]
