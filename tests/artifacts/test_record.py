"""The verification record: one format, one class; a damaged record reads as absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from artifact_helpers import path_model, write_file

from inferfleet.artifacts.record import RECORD_NAME, Record, stat_key
from inferfleet.artifacts.verify import gate


def test_put_vouches_until_the_file_changes(tmp_path: Path) -> None:
    entry = write_file(tmp_path, "m.gguf", b"GGUF-one")
    st = (tmp_path / "m.gguf").stat()
    record = Record(tmp_path)
    record.put("m.gguf", st, sha256=entry["sha256"], gitsha1=None)
    again = Record(tmp_path)  # read back from disk
    assert again.vouches("m.gguf", st, sha256=entry["sha256"], gitsha1=None)
    assert not again.vouches("m.gguf", st, sha256="0" * 64, gitsha1=None)
    assert json.loads((tmp_path / RECORD_NAME).read_text()) == {
        "m.gguf": {"stat": stat_key(st), "sha256": entry["sha256"]}
    }
    write_file(tmp_path, "m.gguf", b"GGUF-two")  # same size, new mtime
    changed = (tmp_path / "m.gguf").stat()
    assert not again.vouches("m.gguf", changed, sha256=entry["sha256"], gitsha1=None)
    assert again.known_sha256("m.gguf", changed) is None
    assert again.recorded_sha256("m.gguf") == entry["sha256"]
    again.forget("m.gguf")
    assert json.loads((tmp_path / RECORD_NAME).read_text()) == {}
    # Written by atomic_write: no temp file is left next to it.
    assert sorted(p.name for p in tmp_path.iterdir()) == [RECORD_NAME, "m.gguf"]


@pytest.mark.parametrize(
    "damaged",
    [
        "[]",
        '{"x": 5}',
        '{"m.gguf": {"stat": [1, 2',  # torn mid-write by an old writer
        "",
        '"just a string"',
        '{"m.gguf": {"sha256": "%s"}}',  # no stat key
        '{"m.gguf": {"stat": "[1, 2, 3]", "sha256": "%s"}}',
        '{"m.gguf": {"stat": [1, 2, true], "sha256": "%s"}}',
        '{"m.gguf": {"stat": [1, 2, 3], "sha256": 5}}',
        '{"m.gguf": {"stat": [1, 2, 3]}}',  # vouches for no hash at all
    ],
)
def test_a_damaged_record_is_treated_as_absent(tmp_path: Path, damaged: str) -> None:
    entry = write_file(tmp_path, "m.gguf", b"GGUF" + bytes(1000))
    record_file = tmp_path / RECORD_NAME
    record_file.write_text(damaged.replace("%s", entry["sha256"]))
    assert Record(tmp_path).entries() == {}
    model = path_model(tmp_path, [entry])
    hashed: list[int] = []
    results = gate("m", model, tmp_path, where="test", on_bytes=hashed.append)
    # Not a crash, not trusted: the file was hashed and a good record replaced the bad one.
    assert [(c.status, c.method) for c in results] == [("ok", "sha256")]
    assert sum(hashed) == entry["size"]
    assert json.loads(record_file.read_text())["m.gguf"]["sha256"] == entry["sha256"]


def test_a_damaged_entry_does_not_cost_the_good_ones(tmp_path: Path) -> None:
    good = write_file(tmp_path, "good.gguf", b"good")
    st = (tmp_path / "good.gguf").stat()
    (tmp_path / RECORD_NAME).write_text(
        json.dumps(
            {
                "good.gguf": {"stat": stat_key(st), "sha256": good["sha256"]},
                "bad.gguf": {"stat": None},
            }
        )
    )
    record = Record(tmp_path)
    assert set(record.entries()) == {"good.gguf"}
    assert record.vouches("good.gguf", st, sha256=good["sha256"], gitsha1=None)
