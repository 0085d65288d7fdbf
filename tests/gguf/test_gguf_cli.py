"""``inferfleet gguf inspect`` through the Typer sub-app, and the real Gemma file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fixtures.gguf_builder import STRING, UINT32, GGUFBuilder, gemma3_like
from helpers.real_model import GEMMA
from typer.testing import CliRunner

from inferfleet.cli.gguf_cmd import SCHEMA, app
from inferfleet.errors import UsageError
from inferfleet.gguf import GGUFError, inspect

runner = CliRunner()


def _json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["inspect", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == SCHEMA
    return doc  # type: ignore[no-any-return]


def test_inspect_json(tmp_path: Path) -> None:
    path = (
        gemma3_like()
        .kv("tokenizer.chat_template", STRING, "{{ messages }}")
        .write(tmp_path / "m.gguf")
    )
    doc = _json(str(path), "--ctx", "4096", "--parallel", "2")
    assert doc["architecture"] == "gemma3" and doc["name"] == "tiny gemma3"
    assert doc["file_type"] == "MOSTLY_Q4_K_M"
    assert doc["block_count"] == 18 and doc["nextn_layers"] == 0
    assert doc["head_count"] == 4 and doc["head_count_kv"] == 1
    assert doc["key_length"] == doc["value_length"] == 256
    assert doc["sliding_window"] == 512 and doc["full_attention_layers"] == [5, 11, 17]
    assert doc["chat_template"] == {"present": True, "length": 14, "named": []}
    assert doc["tokenizer"] == {"model": "llama", "vocab_size": 64}
    kv = doc["kv"]
    assert isinstance(kv, dict)
    assert kv["per_token"] == {"full": 3072, "swa": 15360, "nextn": 0}
    assert kv["context"]["total_bytes"] == 54 << 20
    assert (kv["context"]["ctx"], kv["context"]["parallel"]) == (8192, 2)
    # --ctx is per slot everywhere (as in budget); the total is --ctx-total (L-25).
    total = _json(str(path), "--ctx-total", "8192", "--parallel", "2")["kv"]
    assert total["context"] == kv["context"]  # type: ignore[index]
    types = {t["name"]: t for t in doc["types"]}  # type: ignore[attr-defined]
    assert types["q4_0"]["count"] == 18 and types["f32"]["bytes"] == 18 * 640 * 4
    assert len(doc["layers"]) == 18  # type: ignore[arg-type]
    assert doc["metadata"]["gemma3.block_count"] == {"type": "uint32", "value": 18}  # type: ignore[index]
    assert doc["split"] is None and doc["problems"] == [] and "tensors" not in doc


def test_inspect_json_tensors_and_skipped_arrays(tmp_path: Path) -> None:
    path = gemma3_like(n_vocab=2048).write(tmp_path / "m.gguf")
    doc = _json(str(path), "--tensors")
    tokens = doc["metadata"]["tokenizer.ggml.tokens"]  # type: ignore[index]
    assert tokens["value"] == {"array_of": "string", "count": 2048, "loaded": False}
    first = doc["tensors"][0]  # type: ignore[index]
    assert first == {
        "name": "token_embd.weight", "shape": [640, 2048], "type": "q8_0", "type_id": 8,
        "offset": 0, "elements": 640 * 2048, "bytes": 640 * 2048 // 32 * 34,
    }  # fmt: skip


def test_unknown_type_is_reported_by_number(tmp_path: Path) -> None:
    # L-10: a fork's type id 103 is counted, its bytes unknown, and the runtime named.
    b = gemma3_like().tensor("blk.0.ffn_up.weight", (640, 64), 103, n_bytes=4096)
    b.tensor("blk.1.ffn_up.weight", (640, 64), 103, n_bytes=4096)
    doc = _json(str(b.write(tmp_path / "fork.gguf")))
    row = next(t for t in doc["types"] if t["id"] == 103)  # type: ignore[attr-defined]
    assert row == {"id": 103, "name": "type 103", "count": 2, "bytes": None, "known": False}
    assert any("103" in n and "L-10" in n for n in doc["notes"])  # type: ignore[attr-defined]
    human = runner.invoke(app, ["inspect", str(tmp_path / "fork.gguf")], env={"COLUMNS": "200"})
    assert "type 103" in human.stdout and "unknown" in human.stdout


def test_names_from_the_file_are_escaped(tmp_path: Path) -> None:
    b = GGUFBuilder().kv("general.architecture", STRING, "llama")
    b.kv("general.name", STRING, "[bold red]evil[/]\x1b[2J").kv("llama.block_count", UINT32, 1)
    path = b.tensor("[link=x]t[/link]", (4,)).write(tmp_path / "m.gguf")
    result = runner.invoke(app, ["inspect", str(path), "--tensors"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "[bold red]evil[/]\\x1b[2J" in result.stdout  # markup shown, escape made visible
    assert "\x1b" not in result.stdout
    assert "[link=x]t[/link]" in result.stdout


def test_problems_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "short.gguf"
    path.write_bytes(gemma3_like().build()[:-1000])
    result = runner.invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 1
    assert any("truncated" in p for p in json.loads(result.stdout)["problems"])


def test_errors_are_gguf_errors_for_the_app_to_print(tmp_path: Path) -> None:
    result = runner.invoke(app, ["inspect", str(tmp_path / "missing.gguf")])
    assert isinstance(result.exception, GGUFError)
    (tmp_path / "m.gguf").write_bytes(gemma3_like().build())
    result = runner.invoke(app, ["inspect", str(tmp_path / "m.gguf"), "--ctx", "64",
                                 "--cache-type-k", "q9"])  # fmt: skip
    assert isinstance(result.exception, UsageError)
    both = ["inspect", str(tmp_path / "m.gguf"), "--ctx", "64", "--ctx-total", "128"]
    result = runner.invoke(app, both)
    assert isinstance(result.exception, UsageError) and "--ctx-total" in str(result.exception)


@pytest.mark.usefixtures("gemma_file")
def test_real_gemma_file() -> None:
    start = time.perf_counter()
    result = inspect(GEMMA)
    assert time.perf_counter() - start < 1.0  # gguf-py's GGUFReader takes ~20 s
    assert result.architecture == "gemma3" and result.name == "Gemma 3 270m"
    assert result.file_type == "MOSTLY_Q4_K_M" and result.version == 3
    assert result.block_count == 18 and result.context_length == 32768
    assert (result.head_count, result.head_count_kv) == (4, 1)
    assert (result.key_length, result.value_length) == (256, 256)
    assert result.sliding_window == 512 and result.full_attention_layers == (5, 11, 17)
    assert result.nextn_layers == 0 and result.expert_count is None
    assert result.tokenizer_model == "llama" and result.vocab_size == 262144
    assert result.chat_template_length is None  # this build carries no template (L-19)
    assert result.parameter_count == 268_098_176 and len(result.tensors) == 236
    assert {s.name: s.count for s in result.type_histogram} == {
        "f32": 109, "q5_0": 81, "q4_K": 27, "q8_0": 10, "q6_K": 9,
    }  # fmt: skip
    assert result.parts[0].header_bytes == 6_525_120
    assert result.problems == () and result.unknown_type_ids == ()
