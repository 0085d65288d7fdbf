"""benchmarks/publish.py: the handbook's benchmark table (docs/benchmarks.md) and the plots
are a pure, byte-stable function of the recorded figures, the committed table never drifts
from the committed figures, and a bad results file stops publishing before anything is written."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import publish  # noqa: E402
import results  # noqa: E402

DOCS = ROOT / "docs" / "benchmarks"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def committed_docs() -> dict[str, dict[str, object]]:
    return publish.load_docs(DOCS)


def plotted(docs: dict[str, dict[str, object]]) -> list[str]:
    return [name for name, doc in docs.items() if "skipped" not in doc]


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A results dir holding the committed figures, an empty docs dir, a README with markers."""
    res, docs = tmp_path / "results", tmp_path / "docs" / "benchmarks"
    res.mkdir()
    for path in DOCS.glob("*.json"):
        shutil.copy(path, res / path.name)
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\n## Benchmarks\n\n{publish.START}\nold\n{publish.END}\n\n## Tests\n")
    return res, docs, readme


def run(res: Path, docs: Path, readme: Path) -> int:
    return publish.main(
        ["--from-results", "--results", str(res), "--docs", str(docs), "--readme", str(readme)]
    )


def png_chunks(data: bytes) -> list[bytes]:
    assert data.startswith(PNG_SIGNATURE)
    chunks, at = [], len(PNG_SIGNATURE)
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        chunks.append(data[at + 4 : at + 8])
        at += 12 + length
    return chunks


def test_committed_figures_are_published_with_the_machine_stamp() -> None:
    docs = committed_docs()
    assert set(docs) >= {"cli_startup", "gguf_inspect", "fetch_verify", "deploy_overhead"}
    for name, doc in docs.items():
        stamp = doc["machine"]
        assert isinstance(stamp, dict) and set(stamp) == set(results.MACHINE_KEYS), name
        assert str(stamp["date_utc"]).endswith("Z")
    for name in plotted(docs):
        assert (DOCS / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), name


def test_benchmarks_page_section_is_what_the_committed_figures_render() -> None:
    """Editing the table by hand (or committing figures without publishing) fails here."""
    readme = publish.README.read_text(encoding="utf-8")
    expected = publish.render_section(committed_docs(), "benchmarks")
    assert publish.current_section(readme) == expected, (
        "docs/benchmarks.md's benchmark table differs from docs/benchmarks/*.json: "
        "run .venv/bin/python benchmarks/publish.py --from-results"
    )


def test_publishing_twice_gives_the_same_readme_and_byte_identical_pngs(
    workspace: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    res, docs, readme = workspace
    assert run(res, docs, readme) == 0
    first_readme = readme.read_text()
    first = {p.name: p.read_bytes() for p in docs.iterdir()}
    assert run(res, docs, readme) == 0
    assert readme.read_text() == first_readme
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == first
    # the text around the markers is kept, the section is the rendered one
    assert first_readme.startswith("# t\n\n## Benchmarks\n\n")
    assert first_readme.endswith("\n\n## Tests\n")
    assert publish.current_section(first_readme) == publish.render_section(
        publish.load_docs(res), "docs/benchmarks"
    )
    # the same JSON as the results, one file per benchmark, a plot per measured one
    names = plotted(publish.load_docs(res))
    assert names and sorted(p for p in first if p.endswith(".png")) == sorted(
        f"{n}.png" for n in names
    )
    for name in names:
        chunks = png_chunks(first[f"{name}.png"])
        assert b"tEXt" not in chunks and b"tIME" not in chunks and b"iTXt" not in chunks
        assert (docs / f"{name}.json").read_text() == (res / f"{name}.json").read_text()


def test_a_png_is_the_same_bytes_when_drawn_again() -> None:
    docs = committed_docs()
    name = plotted(docs)[0]
    assert publish.plot(docs[name]) == publish.plot(json.loads(json.dumps(docs[name])))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda doc: "{not json", "is not valid JSON"),
        (lambda doc: {**doc, "figures": {"x": "fast"}}, "must be a finite number"),
        (lambda doc: {**doc, "machine": {}}, "machine must hold exactly"),
        (
            lambda doc: {**doc, "rows": [{**doc["rows"][0], "figure": "missing_s"}]},
            "names figure 'missing_s'",
        ),
        (
            lambda doc: {**doc, "rows": [{**doc["rows"][0], "label": "a | b"}]},
            "control character or '|'",
        ),
        (lambda doc: {**doc, "benchmark": "other_name"}, "holds benchmark 'other_name'"),
    ],
)
def test_a_malformed_results_file_is_named_and_nothing_is_written(
    workspace: tuple[Path, Path, Path],
    capsys: pytest.CaptureFixture[str],
    damage: object,
    problem: str,
) -> None:
    res, docs, readme = workspace
    assert run(res, docs, readme) == 0  # a first, good publication
    before_readme = readme.read_bytes()
    before = {p.name: p.read_bytes() for p in docs.iterdir()}
    victim = res / "cli_startup.json"
    doc = json.loads(victim.read_text())
    broken = damage(doc)  # type: ignore[operator]
    victim.write_text(broken if isinstance(broken, str) else json.dumps(broken))
    capsys.readouterr()
    assert run(res, docs, readme) != 0
    err = capsys.readouterr().err
    assert str(victim) in err and problem in err, err
    assert "Traceback" not in err
    assert readme.read_bytes() == before_readme
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == before  # no temp files either
    assert sorted(p.name for p in readme.parent.iterdir()) == ["README.md", "docs", "results"]


def test_a_readme_without_the_markers_is_refused_and_nothing_is_written(
    workspace: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    res, docs, readme = workspace
    readme.write_text("# t\n\nno table here\n")
    assert run(res, docs, readme) != 0
    err = capsys.readouterr().err
    assert str(readme) in err and publish.START in err
    assert readme.read_text() == "# t\n\nno table here\n"
    assert not docs.exists()


def test_a_benchmark_that_cannot_run_is_published_as_not_run_with_why(
    workspace: tuple[Path, Path, Path],
) -> None:
    res, docs, readme = workspace
    bench = publish.Benchmark("bench_vs_reference", "t", (), lambda: "no reference client here")
    publish.run_one(bench, res)
    assert run(res, docs, readme) == 0
    section = publish.current_section(readme.read_text())
    assert "Not run: no reference client here." in section
    assert (docs / "bench_vs_reference.json").exists()
    assert not (docs / "bench_vs_reference.png").exists()


def test_record_refuses_a_row_for_a_figure_it_did_not_measure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path / "r")
    with pytest.raises(results.ResultsError, match="names figure 'b_s'"):
        results.record("t", {"a_s": 1.0}, rows=[results.Row("b_s", "b", "s", True)])
    assert not (tmp_path / "r").exists()


def test_rows_judge_targets_on_the_figure_or_the_ratio() -> None:
    figures = {"ours": 0.9, "ref": 1.0}
    assert results.Row("ours", "l", "s", True, target=1.0).met(figures) is True
    assert results.Row("ours", "l", "MB/s", False, "ref", "r", 0.95, "ratio").met(figures) is False
    assert results.Row("ours", "l", "MB/s", False, "ref", "r", 0.85, "ratio").met(figures) is True
    assert results.Row("ours", "l", "s", True, "ref").met(figures) is None
