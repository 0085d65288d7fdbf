"""The one verify gate: stat first (L-08), hash once what no record vouches for, refuse
only a mismatch (L-01), never record one; splits declared whole (L-04)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from artifact_helpers import git_blob_id, path_model, write_file

from inferfleet.artifacts.manifest import ManifestEntry
from inferfleet.artifacts.record import RECORD_NAME
from inferfleet.artifacts.verify import FilesRejected, gate, verify_files
from inferfleet.errors import ArtifactError

DATA = b"GGUF" + bytes(range(256)) * 64


class Progress:
    """What the gate reported: on_start calls and hashed bytes."""

    def __init__(self) -> None:
        self.starts: list[tuple[int, int]] = []
        self.hashed = 0

    def start(self, total: int, files: int) -> None:
        self.starts.append((total, files))

    def bytes(self, count: int) -> None:
        self.hashed += count

    def run(self, model: Any, folder: Path, **kwargs: Any) -> Any:
        return gate(
            "m", model, folder, where="service a", on_bytes=self.bytes, on_start=self.start,
            **kwargs,
        )  # fmt: skip


def record_of(folder: Path) -> dict[str, Any]:
    path = folder / RECORD_NAME
    return json.loads(path.read_text()) if path.exists() else {}


def test_a_file_without_a_record_is_hashed_once_then_vouched_for(tmp_path: Path) -> None:
    entry = write_file(tmp_path, "m.gguf", DATA)
    model = path_model(tmp_path, [entry])
    first = Progress()
    results = first.run(model, tmp_path)
    assert [(c.path, c.status, c.method) for c in results] == [("m.gguf", "ok", "sha256")]
    assert first.starts == [(len(DATA), 1)] and first.hashed == len(DATA)
    assert record_of(tmp_path)["m.gguf"]["sha256"] == entry["sha256"]
    second = Progress()
    again = second.run(model, tmp_path)
    assert [(c.status, c.method) for c in again] == [("ok", "record")]
    assert second.starts == [] and second.hashed == 0  # not read again
    full = Progress()
    assert [c.method for c in full.run(model, tmp_path, full=True)] == ["sha256"]
    assert full.hashed == len(DATA)


def test_a_wrong_hash_is_refused_and_never_recorded_L01(tmp_path: Path) -> None:
    entry = write_file(tmp_path, "m.gguf", DATA)
    declared = {**entry, "sha256": "0" * 64}
    progress = Progress()
    with pytest.raises(FilesRejected) as caught:
        progress.run(path_model(tmp_path, [declared]), tmp_path)
    error = caught.value
    assert isinstance(error, ArtifactError) and error.where == "service a"
    assert error.message == (
        f"model m: 1 of 1 declared file(s) in {tmp_path} failed verification: "
        f"m.gguf: sha256 {entry['sha256']} on disk, {'0' * 64} declared (L-01)"
    )
    assert "nothing was stopped or started" in error.hint
    assert progress.hashed == len(DATA)
    assert "m.gguf" not in record_of(tmp_path)
    # A file that was verified for other bytes loses its entry when the declaration changes.
    gate("m", path_model(tmp_path, [entry]), tmp_path, where="x")
    assert "m.gguf" in record_of(tmp_path)
    with pytest.raises(FilesRejected):
        gate("m", path_model(tmp_path, [declared]), tmp_path, where="x")
    assert record_of(tmp_path) == {}


def test_a_wrong_size_is_refused_by_stat_without_hashing_anything_L08(tmp_path: Path) -> None:
    good = write_file(tmp_path, "a.gguf", DATA)
    short = write_file(tmp_path, "b.bin", DATA)
    declared = [good, {**short, "size": short["size"] + 1}]
    progress = Progress()
    with pytest.raises(FilesRejected) as caught:
        progress.run(path_model(tmp_path, declared), tmp_path)
    assert (
        f"b.bin: {len(DATA):,} bytes on disk, {len(DATA) + 1:,} declared (L-08)"
        in caught.value.message
    )
    assert "put the declared file in the model's folder" in caught.value.hint
    assert progress.starts == [] and progress.hashed == 0
    assert record_of(tmp_path) == {}


def test_a_missing_file_names_the_folder_and_how_to_fetch_it(tmp_path: Path) -> None:
    from inferfleet.fleetfile.fleet import Model

    model = Model.model_validate(
        {
            "source": {"hub": "org/m"},
            "dir": str(tmp_path),
            "files": [{"path": "m.gguf", "size": 4, "sha256": "0" * 64}],
        }
    )
    with pytest.raises(FilesRejected) as caught:
        gate("m", model, tmp_path, where="service a")
    assert f"in {tmp_path} failed verification: m.gguf: not on disk" in caught.value.message
    assert "inferfleet models fetch m" in caught.value.hint


def test_report_all_hashes_the_rest_and_lists_every_problem(tmp_path: Path) -> None:
    good = write_file(tmp_path, "good.gguf", DATA)
    bad = write_file(tmp_path, "bad.gguf", DATA)
    declared = [good, {**bad, "sha256": "f" * 64}, {"path": "gone.gguf", "size": 3}]
    with pytest.raises(FilesRejected) as caught:
        gate("m", path_model(tmp_path, declared), tmp_path, where="x", report_all=True)
    statuses = {c.path: c.status for c in caught.value.results}
    assert statuses == {"good.gguf": "ok", "bad.gguf": "wrong-hash", "gone.gguf": "missing"}
    assert "2 of 3 declared file(s)" in caught.value.message
    assert set(record_of(tmp_path)) == {"good.gguf"}


def test_an_incomplete_split_is_refused_before_any_file_is_read_L04(tmp_path: Path) -> None:
    parts = [write_file(tmp_path, f"big-0000{n}-of-00003.gguf", b"x") for n in (1, 3)]
    progress = Progress()
    with pytest.raises(ArtifactError) as caught:
        progress.run(path_model(tmp_path, parts), tmp_path)
    assert caught.value.message == (
        "model m: split big has 3 parts but 2 are declared (missing part 2)"
    )
    assert caught.value.where == "service a" and "nothing was stopped" in caught.value.hint
    assert progress.hashed == 0
    mixed = [*parts, write_file(tmp_path, "big-00002-of-00004.gguf", b"x")]
    with pytest.raises(ArtifactError, match="disagree on the part count"):
        gate("m", path_model(tmp_path, mixed), tmp_path, where="x")


def test_gitsha1_files_and_size_only_entries(tmp_path: Path) -> None:
    readme = b"# a model card\n"
    write_file(tmp_path, "README.md", readme)
    write_file(tmp_path, "tokenizer.json", b"{}")
    entries = [
        ManifestEntry("README.md", len(readme), "gitsha1", git_blob_id(readme)),
        ManifestEntry("tokenizer.json", 2, "size", ""),
    ]
    results = verify_files(tmp_path, entries)
    assert [(c.path, c.method, c.ok) for c in results] == [
        ("README.md", "gitsha1", True),
        ("tokenizer.json", "stat", True),
    ]
    assert record_of(tmp_path)["README.md"]["gitsha1"] == git_blob_id(readme)
    assert [c.method for c in verify_files(tmp_path, entries)] == ["record", "stat"]


def test_a_changed_file_is_hashed_again(tmp_path: Path) -> None:
    entry = write_file(tmp_path, "m.gguf", DATA)
    model = path_model(tmp_path, [entry])
    gate("m", model, tmp_path, where="x")
    path = tmp_path / "m.gguf"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    progress = Progress()
    assert [c.method for c in progress.run(model, tmp_path)] == ["sha256"]
    assert progress.hashed == len(DATA)


def test_many_files_are_hashed_on_several_threads_with_serialised_progress(
    tmp_path: Path,
) -> None:
    files = [write_file(tmp_path, f"f{n}.bin", bytes([n]) * (5 << 20)) for n in range(6)]
    progress = Progress()
    results = progress.run(path_model(tmp_path, files), tmp_path)
    assert all(c.ok and c.method == "sha256" for c in results)
    assert progress.starts == [(6 * (5 << 20), 6)] and progress.hashed == 6 * (5 << 20)
