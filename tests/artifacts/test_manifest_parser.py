"""The one manifest parser: kinds, header, file:line errors, declared files (L-05, L-09)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inferfleet.artifacts.manifest import (
    Manifest,
    ManifestEntry,
    declared_files,
    fragment_sets,
    parse_manifest,
)
from inferfleet.errors import SpecError
from inferfleet.fleetfile.loader import load_fleet

SHA = "a" * 64
GIT = "b" * 40
COMMIT = "c" * 40


def test_render_then_parse_is_the_same_manifest(tmp_path: Path) -> None:
    made = Manifest(
        "org/model",
        "main",
        COMMIT,
        (
            ManifestEntry("model.gguf", 90, "sha256", SHA),
            ManifestEntry("README.md", 12, "gitsha1", GIT),
            ManifestEntry("big.gguf", 30, "parts", "3"),
            ManifestEntry("dir/with space.json", 5, "sha256", SHA),
        ),
    )
    path = tmp_path / "m.manifest"
    path.write_text(made.render())
    parsed = parse_manifest(path)
    assert (parsed.repo, parsed.revision, parsed.commit) == ("org/model", "main", COMMIT)
    assert sorted(parsed.entries, key=lambda e: e.path) == sorted(
        made.entries, key=lambda e: e.path
    )
    by_path = {e.path: e for e in parsed.entries}
    assert by_path["model.gguf"].sha256 == SHA and by_path["model.gguf"].gitsha1 is None
    assert by_path["README.md"].gitsha1 == GIT and by_path["README.md"].sha256 is None
    assert by_path["big.gguf"].sha256 is None and by_path["big.gguf"].value == "3"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("90 model.gguf", "must be `SIZE KIND:VALUE PATH`"),
        ("ninety sha256:" + SHA + " model.gguf", "must be `SIZE KIND:VALUE PATH`"),
        ("90 md5:" + "d" * 32 + " model.gguf", "unknown hash kind 'md5'"),
        ("90 sha256:" + "A" * 64 + " model.gguf", "bad sha256 value"),
        ("90 gitsha1:" + SHA + " model.gguf", "bad gitsha1 value"),
        ("90 parts:0 model.gguf", "bad parts value"),
        ("90 sha256:" + SHA + " ../escape.gguf", "leaves the model's folder"),
        ("90 sha256:" + SHA + " /etc/passwd", "leaves the model's folder"),
        ("# commit: main", "is not a 40-hex git sha"),
        ("12 sha256:" + SHA + " ok.gguf", "ok.gguf is listed twice (first on line 3)"),
    ],
)
def test_every_bad_line_is_an_error_at_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "m.manifest"
    path.write_text(f"# inferfleet manifest v1\n\n12 sha256:{SHA} ok.gguf\n{line}\n")
    with pytest.raises(SpecError) as caught:
        parse_manifest(path)
    assert caught.value.where == f"{path}:4"
    assert message in caught.value.message
    assert caught.value.hint


def test_an_empty_or_missing_manifest_names_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.manifest"
    empty.write_text("# inferfleet manifest v1\n# repo: org/model\n")
    with pytest.raises(SpecError, match="lists no files") as caught:
        parse_manifest(empty)
    assert caught.value.where == str(empty)
    with pytest.raises(SpecError, match="cannot read model manifest") as caught:
        parse_manifest(tmp_path / "nope.manifest")
    assert "inferfleet models manifest" in caught.value.hint
    binary = tmp_path / "binary.manifest"
    binary.write_bytes(b"\xff\xfe not text")
    with pytest.raises(SpecError, match="not UTF-8"):
        parse_manifest(binary)


def test_declared_files_read_the_manifest_next_to_the_fleet_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "fleet-repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "m.manifest").write_text(
        f"# inferfleet manifest v1\n90 sha256:{SHA} m.gguf\n12 gitsha1:{GIT} README.md\n"
    )
    fleet = {
        "version": 1,
        "hosts": {"local": {"address": "localhost"}},
        "models": {
            "m": {"source": {"hub": "org/m"}, "manifest": "models/m.manifest"},
            "inline": {
                "source": {"path": "/srv/inline"},
                "files": [
                    {"path": "x.gguf", "size": 7, "sha256": SHA},
                    {"path": "tokenizer.json", "size": 3},
                ],
            },
        },
    }
    (repo / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # resolved from the fleet file's folder, not the cwd
    loaded = load_fleet(repo / "fleet.yaml")
    files = declared_files(loaded.fleet.models["m"], loaded.root)
    assert [(f.path, f.size, f.kind) for f in files] == [
        ("m.gguf", 90, "sha256"),
        ("README.md", 12, "gitsha1"),
    ]
    inline = declared_files(loaded.fleet.models["inline"], loaded.root)
    assert [(f.path, f.kind, f.sha256) for f in inline] == [
        ("x.gguf", "sha256", SHA),
        ("tokenizer.json", "size", None),
    ]


def test_fragment_sets_group_in_numeric_order_L05() -> None:
    entries = [ManifestEntry(f"big.gguf.part{n}of11", 1, "sha256", SHA) for n in (10, 2, 1, 11)]
    entries += [ManifestEntry("other.bin.part1of2", 1, "sha256", SHA)]
    entries += [ManifestEntry("mixed.bin.part1of2", 1, "sha256", SHA)]
    entries += [ManifestEntry("mixed.bin.part2of3", 1, "sha256", SHA)]
    found = {s.base: s for s in fragment_sets(entries)}
    assert found["big.gguf"].ordered() == tuple(f"big.gguf.part{n}of11" for n in (1, 2, 10, 11))
    assert found["big.gguf"].missing == [3, 4, 5, 6, 7, 8, 9]
    assert found["other.bin"].missing == [2] and not found["other.bin"].mixed
    assert found["mixed.bin"].mixed
