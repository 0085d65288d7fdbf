"""``archive restore`` trusts nothing a tampered index says (L-41, L-55).

An index is hostile state: a restore never writes into inferfleet's own
state folder (one entry overwriting another's index, a marker), never gives
back setuid/setgid/sticky bits, refuses paths that do not print as what they
are (bidi overrides, line separators), and reads an index or a stored copy
only as a regular file of a bounded size, checked before reading: a FIFO as
``index.json`` is refused at once instead of hanging.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from test_archive_store import _retired, _rewrite_index, keeper

from inferfleet.io.archive import Archive


def _restore(cli: Any, state: Path, name: str, *extra: str) -> Any:
    return cli("archive", "restore", name, "--state-dir", str(state), *extra)


def test_one_entry_cannot_overwrite_another_entrys_index(cli: Any, tmp_path: Path) -> None:
    state, target, name = _retired(tmp_path)
    other_file = tmp_path / "etc" / "other.env"
    other_file.write_text("B=1\n")
    keeper(state, service="other").remove(other_file)
    (other,) = [e for e in Archive(state).entries() if e.name != name]
    victim = other.folder / "index.json"
    before = victim.read_bytes()
    # The first entry's index is tampered to name the second one's index, its copy forged.
    forged = b'{"service": "other", "files": []}'
    copy = state / "archive" / name / "files" / str(victim).lstrip("/")
    copy.parent.mkdir(parents=True)
    copy.write_bytes(forged)
    sha = hashlib.sha256(forged).hexdigest()
    _rewrite_index(state, name, {"path": str(victim), "sha256": sha, "size": len(forged)})
    result = _restore(cli, state, name, "--force")
    assert result.code == 1, result.stdout
    assert "lies in inferfleet's state folder" in result.stderr
    assert "nothing was restored" in result.stderr and "Traceback" not in result.stderr
    assert victim.read_bytes() == before and not target.exists()


@pytest.mark.parametrize("mode", [0o4755, 0o2750, 0o1777, 0o6711])
def test_setuid_setgid_and_sticky_bits_are_never_restored(
    cli: Any, tmp_path: Path, mode: int
) -> None:
    state, target, name = _retired(tmp_path)
    _rewrite_index(state, name, {"mode": mode})
    result = _restore(cli, state, name)
    assert result.code == 0, result.stderr
    assert target.read_text() == "KEY=v\n"
    assert stat.S_IMODE(target.stat().st_mode) == mode & 0o777


@pytest.mark.parametrize(
    "path", ["/tmp/\u202eenv.sh", "/tmp/a\u2028b", "/tmp/x\x85y", "/tmp/\u2066x\u2069"]
)
def test_paths_that_do_not_print_as_themselves_are_refused(
    cli: Any, tmp_path: Path, path: str
) -> None:
    state, target, name = _retired(tmp_path)
    _rewrite_index(state, name, {"path": path})
    result = _restore(cli, state, name)
    assert result.code == 1 and "control character" in result.stderr, result.stderr
    assert not target.exists() and not Path(path).exists()


def test_a_fifo_or_a_huge_index_is_refused_without_reading_it(cli: Any, tmp_path: Path) -> None:
    state, target, name = _retired(tmp_path)
    index = state / "archive" / name / "index.json"
    index.unlink()
    os.mkfifo(index, 0o600)
    started = time.monotonic()
    listed = json.loads(cli("archive", "list", "--state-dir", str(state), "--json").stdout)
    (row,) = listed["entries"]
    assert "is a FIFO, not a regular file" in row["problem"]
    result = _restore(cli, state, name)
    assert result.code == 1 and "is a FIFO" in result.stderr
    assert time.monotonic() - started < 30  # no writer ever comes: a blocking open hangs
    index.unlink()
    with index.open("wb") as handle:  # 1.5 GB on paper, nothing on disk
        handle.truncate(1_500_000_000)
    index.chmod(0o600)
    result = _restore(cli, state, name)
    assert result.code == 1 and "1,500,000,000 bytes; at most 1,048,576" in result.stderr
    assert not target.exists()
    assert [e.index for e in Archive(state).entries()] == [None]


def test_a_stored_copy_whose_size_differs_is_refused_before_reading(
    cli: Any, tmp_path: Path
) -> None:
    state, target, name = _retired(tmp_path)
    copy = state / "archive" / name / "files" / str(target).lstrip("/")
    with copy.open("r+b") as handle:
        handle.truncate(1_500_000_000)
    result = _restore(cli, state, name)
    assert result.code == 1 and "1500000000 bytes; recorded 6" in result.stderr
    assert not target.exists()
