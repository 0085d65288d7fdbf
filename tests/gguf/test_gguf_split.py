"""Split GGUFs are aggregated (L-04, L-11); .partNofM fragments are recognised (L-05)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.gguf_builder import (
    Q8_0,
    UINT16,
    GGUFBuilder,
    tensor_bytes,
    write_split,
)

from inferfleet.gguf import GGUFError, inspect, parse_fragment_name, parse_split_name
from inferfleet.gguf.split import local_fragments, sibling


def test_split_parts_are_aggregated_from_any_part(tmp_path: Path) -> None:
    paths = write_split(tmp_path)
    for start in paths:
        result = inspect(start)
        assert result.split_count == 3
        assert result.architecture == "llama" and result.name == "big"
        assert len(result.tensors) == 4
        assert result.parameter_count == 2 * (64 * 32 + 64)
        assert [p.split_no for p in result.parts] == [1, 2, 3]
        assert [p.tensor_count for p in result.parts] == [0, 2, 2]  # part 1: metadata only
        per_part = tensor_bytes((64, 32), Q8_0) + 64 * 4
        assert result.parts[1].tensor_bytes == per_part
        assert result.layer_bytes() == {0: per_part, 1: per_part}
        assert result.problems == ()
        assert any("L-04" in n and "big-00001-of-00003.gguf" in n for n in result.notes)


def test_missing_part_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    paths = write_split(tmp_path, skip=3)
    result = inspect(paths[0])
    assert "part 3 of 3 is missing: big-00003-of-00003.gguf" in result.problems
    assert len(result.tensors) == 2


def test_missing_part_one_is_reported(tmp_path: Path) -> None:
    paths = write_split(tmp_path, skip=1)
    result = inspect(paths[1])
    assert any(
        "part 1 (the one with the model's metadata) is missing" in p for p in result.problems
    )


def test_wrong_split_number_is_reported(tmp_path: Path) -> None:
    paths = write_split(tmp_path)
    paths[2].rename(tmp_path / "tmp.gguf")
    paths[1].rename(paths[2])
    (tmp_path / "tmp.gguf").rename(paths[1])
    result = inspect(paths[0])
    assert any("says split.no=2" in p for p in result.problems)


def test_split_header_without_split_name(tmp_path: Path) -> None:
    b = GGUFBuilder().kv("split.no", UINT16, 0).kv("split.count", UINT16, 2)
    result = inspect(b.write(tmp_path / "renamed.gguf"))
    assert result.split_count == 2
    assert "cannot be found" in result.problems[0]


def test_split_names() -> None:
    name = parse_split_name("Qwen3-235B-Q4_K_M-00002-of-00006.gguf")
    assert name is not None and (name.number, name.count) == (2, 6)
    assert name.part(1) == "Qwen3-235B-Q4_K_M-00001-of-00006.gguf"
    assert parse_split_name("model-00007-of-00006.gguf") is None
    assert parse_split_name("model.gguf") is None
    url = "https://huggingface.co/o/r/resolve/main/q/m-00001-of-00002.gguf?download=true"
    assert sibling(url, "m-00002-of-00002.gguf") == (
        "https://huggingface.co/o/r/resolve/main/q/m-00002-of-00002.gguf?download=true"
    )


def test_fragment_names() -> None:
    frag = parse_fragment_name("DeepSeek-R1-Q8_0.gguf.part2of3")
    assert frag is not None and (frag.base, frag.number, frag.count) == (
        "DeepSeek-R1-Q8_0.gguf",
        2,
        3,
    )
    assert frag.fragment(3) == "DeepSeek-R1-Q8_0.gguf.part3of3"
    assert parse_fragment_name("x.gguf.PART1OF2") is not None
    assert parse_fragment_name("x.gguf.part3of2") is None
    assert parse_fragment_name("x-00001-of-00002.gguf") is None


def test_fragments_are_refused_with_the_concatenation_they_need(tmp_path: Path) -> None:
    # L-05: fragment 1 even starts with a valid GGUF magic, but must not be parsed alone.
    (tmp_path / "m.gguf.part1of3").write_bytes(GGUFBuilder().build())
    (tmp_path / "m.gguf.part3of3").write_bytes(b"\0" * 10)
    present, missing = local_fragments(tmp_path / "m.gguf.part1of3")
    assert [p.name for p in present] == ["m.gguf.part1of3", "m.gguf.part3of3"]
    assert missing == [2]
    with pytest.raises(GGUFError, match="fragment 1 of 3 of 'm.gguf'") as info:
        inspect(tmp_path / "m.gguf.part1of3")
    assert "missing here: m.gguf.part2of3" in info.value.message
    assert "concatenate" in info.value.hint and "L-05" in info.value.hint
