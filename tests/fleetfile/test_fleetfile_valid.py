"""Valid fleet files: units, defaults, the embedded example and the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from helpers import ROOT

from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.fleetfile.loader import load_fleet, parse_fleet
from inferfleet.fleetfile.quantities import format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24GiB", 24 * 1024**3),
        ("512MiB", 512 * 1024**2),
        ("1.5TiB", int(1.5 * 1024**4)),
        ("24GB", 24 * 10**9),
        ("24 gib", 24 * 1024**3),
        (1024, 1024),
        ("253113024", 253113024),
    ],
)
def test_sizes(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["24 gigs", "GiB", "-1", -5, True, "1e9", None])
def test_bad_sizes_say_what_is_accepted(bad: object) -> None:
    with pytest.raises(ValueError, match="24GiB"):
        parse_size(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("90s", 90.0), ("20m", 1200.0), ("1h30m", 5400.0), ("500ms", 0.5), (45, 45.0), ("2h", 7200.0)],
)
def test_durations(text: object, expected: float) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["soon", "20 minutes", "m", "5x", -1])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_size() -> None:
    assert format_size(253113024) == "241.4 MiB"
    assert format_size(24 * 1024**3) == "24.0 GiB"


def test_embedded_example_is_the_repo_example_and_valid() -> None:
    repo_copy = ROOT / "examples" / "local" / "fleet.yaml"
    assert repo_copy.read_text() == embedded_example().read_text()
    loaded = load_fleet(embedded_example())
    svc = loaded.fleet.services["gemma"]
    # L-25: the pool is per-slot x slots.
    assert (svc.ctx_per_slot, svc.parallel, svc.ctx_total) == (4096, 2, 8192)
    model = loaded.fleet.models["gemma3-270m"]
    assert model.files[0].size == 253_113_024
    assert loaded.fleet.hosts["local"].is_local("local")


def test_defaults_and_yaml_booleans(tmp_path: Path) -> None:
    text = """
hosts:
  box: {address: 127.0.0.1}
runtimes:
  r: {kind: llama.cpp, binary: /usr/bin/llama-server}
models:
  m:
    source: {path: /models/m}
    files: [{path: m.gguf, size: 1KiB}]
services:
  s:
    host: box
    runtime: r
    model: m
    port: 9000
    ctx_per_slot: 8192
    flash_attn: on
"""
    fleet = parse_fleet(text, tmp_path / "fleet.yaml")
    svc = fleet.services["s"]
    assert svc.flash_attn == "on"  # YAML 1.1 reads `on` as true; we keep the meaning
    assert svc.bind == "127.0.0.1" and svc.parallel == 1 and svc.backend == "process"
    assert svc.health.path == "/health" and svc.health.timeout == 600.0
    assert fleet.models["m"].files[0].size == 1024
    assert fleet.hosts["box"].is_local("box") is True  # a loopback address


def test_different_binds_may_share_a_port(tmp_path: Path) -> None:
    text = """
hosts:
  box: {}
runtimes:
  r: {kind: llama.cpp, binary: /x}
models:
  m: {source: {path: /m}, files: [{path: m.gguf, size: 1}]}
services:
  a: {host: box, runtime: r, model: m, port: 9000, bind: 127.0.0.1, ctx_per_slot: 4096}
  b: {host: box, runtime: r, model: m, port: 9000, bind: 127.0.0.2, ctx_per_slot: 4096}
"""
    fleet = parse_fleet(text, tmp_path / "fleet.yaml")
    assert sorted(fleet.services) == ["a", "b"]


def test_schema_validates_the_example_and_rejects_typos(cli) -> None:
    result = cli("schema")
    assert result.code == 0
    schema = json.loads(result.stdout)
    assert schema["$id"] == "inferfleet.fleet/v1"
    example = yaml.safe_load(embedded_example().read_text())
    jsonschema.validate(example, schema)  # "2GiB" strings are accepted by the schema
    bad = json.loads(json.dumps(example))
    bad["services"]["gemma"]["prot"] = 1
    with pytest.raises(jsonschema.ValidationError, match="prot"):
        jsonschema.validate(bad, schema)
    bad = json.loads(json.dumps(example))
    bad["hosts"]["local"]["devices"][0]["memory"] = "2 gigs"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_show_json_has_argv_with_pool_and_metrics(cli) -> None:
    result = cli("show", "gemma", "--file", str(embedded_example()), "--json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.show/v1"
    argv = doc["argv"]
    assert argv[argv.index("--ctx-size") + 1] == "8192"
    assert argv[argv.index("--parallel") + 1] == "2"
    assert "--metrics" in argv  # L-56


def test_show_unknown_service(cli) -> None:
    result = cli("show", "nope", "--file", str(embedded_example()))
    assert result.code == 2
    assert "no service named 'nope'" in result.stderr and "known services: gemma" in result.stderr


def test_init_scaffolds_a_valid_fleet_and_refuses_to_overwrite(cli, tmp_path: Path) -> None:
    repo = tmp_path / "myfleet"
    result = cli("init", str(repo))
    assert result.code == 0, result.stderr
    assert cli("validate", str(repo / "fleet.yaml")).code == 0
    assert "*.env" in (repo / ".gitignore").read_text()
    (repo / "fleet.yaml").write_text("# mine\n")
    again = cli("init", str(repo))
    assert again.code == 2 and "already exists" in again.stderr
    assert (repo / "fleet.yaml").read_text() == "# mine\n"  # nothing lost
    assert (repo / ".gitignore").read_text().count("*.env") == 1
