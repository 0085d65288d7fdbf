"""Bad bench input is refused before anything is measured or written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.real_server import fleet_data, write_fleet

from inferfleet.bench import outputs
from inferfleet.bench.arms import arm_fleet, load_arms
from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import load_fleet


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("arms: []", "arms: List should have at least 1 item"),
        ("arms:\n  - name: a\n    service: x\n    url: http://h:1", "exactly one of"),
        ("arms:\n  - name: a\n", "exactly one of"),
        ("arms:\n  - {name: a, url: 'http://h:1'}\n  - {name: a, service: s}", "unique: a"),
        ("arms:\n  - {name: a, servce: s}", "Extra inputs are not permitted"),
        ("arms:\n  - {name: 'bad name', service: s}", "String should match pattern"),
        ("arms:\n  - name: a\n   url: [", "not valid YAML"),
        ("arms:\n  - {name: a, start: {service: s, st: {}}}", "Extra inputs"),
    ],
)
def test_bad_arms_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "arms.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message) as info:
        load_arms(path)
    assert str(path) in info.value.where


def test_a_missing_arms_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read arms file .*: it does not exist"):
        load_arms(tmp_path / "nope.yaml")


def test_set_is_merged_into_the_service_and_validated(tmp_path: Path) -> None:
    loaded = load_fleet(write_fleet(tmp_path / "fleet.yaml", fleet_data(18000)))
    arms = (tmp_path / "arms.yaml", "arms:\n  - {name: q8, start: {service: gemma, set: {}}}")
    arms[0].write_text(arms[1])
    (spec,) = load_arms(arms[0])
    assert spec.start is not None
    merged = spec.start.model_copy(update={"set": {"kv_cache": {"k": "q8_0"}, "parallel": 1}})
    new, service = arm_fleet(loaded, merged, "q8")
    assert (service.kv_cache.k, service.kv_cache.v, service.parallel) == ("q8_0", "f16", 1)
    assert service.port != 18000 and new.fleet.services["gemma"] == service
    assert loaded.fleet.services["gemma"].parallel == 2  # the original is untouched
    bad = spec.start.model_copy(update={"set": {"parallel": 0}})
    with pytest.raises(UsageError, match="invalid service: parallel"):
        arm_fleet(loaded, bad, "q8")
    unknown = spec.start.model_copy(update={"service": "nope"})
    with pytest.raises(UsageError, match="no service named 'nope'"):
        arm_fleet(loaded, unknown, "q8")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-tokens", "64"], "below 128"),
        (["--concurrency", "1,x"], "not a list of whole numbers"),
        (["--concurrency", "0"], "at least 1"),
        (["--runs", "0"], "--runs must be at least 1"),
        (["--api", "responses"], "not chat or completions"),
        (["--prompt-ids", "bisect,nope"], "unknown prompt id"),
        (["--memory-slack", "lots"], "is not a size"),
    ],
)
def test_bad_arguments_exit_2_and_write_nothing(
    cli: Callable[..., Any], tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "results"
    result = cli("bench", "http://127.0.0.1:9", "--out", str(out), *args)
    assert result.code == 2, result.stderr
    assert message in result.stderr
    assert not out.exists()


def test_a_used_results_folder_is_refused_before_measuring(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    # Port 9 has no server: the refusal must come before any request.
    result = cli("bench", "http://127.0.0.1:9", "--out", str(out))
    assert result.code == 2 and "already exists and is not an empty folder" in result.stderr
    assert [p.name for p in out.iterdir()] == ["summary.json"]


def test_no_target_and_no_arms(cli: Callable[..., Any]) -> None:
    result = cli("bench")
    assert result.code == 2 and "name a SERVICE or URL" in result.stderr


def test_outputs_are_all_or_nothing(tmp_path: Path) -> None:
    out = tmp_path / "results"
    with pytest.raises(KeyError):
        outputs.write(out, {"levels": []}, [])  # a broken summary fails mid-way
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder left behind


def test_an_unreachable_endpoint_fails_clearly_and_writes_nothing(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    from helpers import free_port

    out = tmp_path / "results"
    result = cli("bench", f"http://127.0.0.1:{free_port()}", "--out", str(out))
    assert result.code == 1
    assert "cannot reach" in result.stderr and "is the server running" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
