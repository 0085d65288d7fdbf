"""The GGUF reader holds a bounded amount of memory whatever the header claims.

A 16 MB metadata string once cost 1.3 GB and 43 s in ``gguf inspect``; a
1 GB string in a sparse file (a few KB on disk) ran the machine out of
memory. A metadata string is at most 1 MiB (a chat template 8 MiB), the
header read at most 64 MiB and arrays decoded at most 64 MiB, each refused
before the bytes are read. Every case runs the real CLI in a subprocess
under ``RLIMIT_AS`` = 256 MiB: a reader that materialised the claim would
die with MemoryError instead of printing the error.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.gguf_builder import STRING, UINT32, gemma3_like, pack_string

from inferfleet.gguf import read_header_at
from inferfleet.gguf.errors import GGUFError

LIMIT = 256 << 20
# The real entry point with its address space capped before anything is imported.
CAPPED = (
    "import resource, runpy, sys; "
    f"resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT})); "
    "sys.argv = ['inferfleet', *sys.argv[1:]]; "
    "runpy.run_module('inferfleet', run_name='__main__')"
)


def inspect_capped(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CAPPED, "gguf", "inspect", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"},
    )
    return done, time.monotonic() - started


def _with_string(path: Path, key: str, length: int, *, sparse: bool = False) -> Path:
    """A small valid model with metadata ``key`` claiming a string of ``length`` bytes."""
    head = gemma3_like().header()
    n_kv_at = 4 + 4 + 8
    (n_kv,) = struct.unpack_from("<Q", head, n_kv_at)
    kv = pack_string(key) + struct.pack("<IQ", STRING, length)
    tail = head[24:]
    with path.open("wb") as handle:
        handle.write(head[:n_kv_at] + struct.pack("<Q", n_kv + 1) + kv)
        if sparse:
            handle.seek(length, os.SEEK_CUR)  # a hole: the file claims the bytes, the disk has none
        else:
            handle.write(b"x" * length)
        handle.write(tail)
    return path


def _assert_refused(done: subprocess.CompletedProcess[str], seconds: float, says: str) -> None:
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode not in (0, -9), text  # refused, not killed
    assert says in text, text
    assert "MemoryError" not in text and "Traceback" not in text and "internal error" not in text
    assert seconds < 60, seconds  # generous: the point is the bound, not the clock


@pytest.mark.parametrize(
    ("key", "length", "sparse", "says"),
    [
        ("general.description", 16 << 20, False, "claims 16,777,216 bytes; at most 1,048,576"),
        ("tokenizer.chat_template", 64 << 20, False, "claims 67,108,864 bytes; at most 8,388,608"),
        ("general.description", 1 << 30, True, "claims 1,073,741,824 bytes; at most 1,048,576"),
    ],
    ids=["16 MB string", "64 MB chat template", "1 GB string in a sparse file"],
)
def test_a_huge_metadata_string_is_refused_under_256_mib(
    tmp_path: Path, key: str, length: int, sparse: bool, says: str
) -> None:
    path = _with_string(tmp_path / "m.gguf", key, length, sparse=sparse)
    done, seconds = inspect_capped(str(path))
    _assert_refused(done, seconds, says)


def test_strings_within_their_bounds_still_read(tmp_path: Path) -> None:
    path = _with_string(tmp_path / "m.gguf", "tokenizer.chat_template", 2 << 20)
    header = read_header_at(path)
    assert len(str(header.metadata["tokenizer.chat_template"])) == 2 << 20


def test_a_header_claiming_more_than_its_budget_is_refused_under_256_mib(tmp_path: Path) -> None:
    # 100 strings of 1 MiB each (every one within its own bound) in a sparse file.
    head = gemma3_like().header()
    (n_kv,) = struct.unpack_from("<Q", head, 16)
    path = tmp_path / "wide.gguf"
    with path.open("wb") as handle:
        handle.write(head[:16] + struct.pack("<Q", n_kv + 100))
        for i in range(100):
            handle.write(pack_string(f"x.k{i}") + struct.pack("<IQ", STRING, 1 << 20))
            handle.seek(1 << 20, os.SEEK_CUR)
        handle.write(head[24:])
    done, seconds = inspect_capped(str(path))
    _assert_refused(done, seconds, "the header needs more than 64 MiB")


def test_two_hundred_thousand_keys_display_truncated(tmp_path: Path) -> None:
    builder = gemma3_like()
    for i in range(200_000):
        builder.kv(f"x.k{i}", UINT32, i)
    path = builder.write(tmp_path / "keys.gguf")
    done, seconds = inspect_capped(str(path))
    assert done.returncode == 0, done.stderr
    total = 200_000 + len(gemma3_like().kvs)
    assert f"… {total - 500:,} more metadata keys (--json lists every one)" in done.stdout
    assert done.stdout.count("x.k") <= 500
    assert seconds < 60


def test_a_fifo_as_the_model_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "m.gguf"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(GGUFError, match="is a FIFO, not a regular file"):
        read_header_at(fifo)
    assert time.monotonic() - started < 5
