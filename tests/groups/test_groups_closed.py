"""A swap group is as closed as a single service (L-06, L-25, L-58).

Every member passes the launch refusals of a single service (its
``extra_args`` become the router's presets), a preset value llama.cpp's
reader would cut short is refused, never written, the presets are installed
mode 600, and the router is reached through the gateway only.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from group_fleet import BIG, GROUP, SMALL, group_data, write
from helpers.cli import CliResult

from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.bundle import render_fleet
from inferfleet.render.facts import default_facts
from inferfleet.render.pipeline import service_launch

Cli = Callable[..., CliResult]


def _render(tmp_path: Path, data: dict[str, Any]) -> str:
    """The refusal's text, after checking render raised before returning anything."""
    loaded = load_fleet(write(tmp_path / "fleet.yaml", data))
    with pytest.raises(UsageError) as caught:
        render_fleet(loaded, GROUP)
    facts = default_facts(loaded.fleet.hosts["local"])
    with pytest.raises(UsageError):
        service_launch(loaded.fleet, loaded.root, GROUP, facts)
    return " ".join(caught.value.render().split())


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["--api-key", "sk-hidden-value"], "passes --api-key on its command line"),
        (["--hf-repo", "someone/any-GGUF:Q4_K_M"], "sets --hf-repo in extra_args"),
        (["--model-url", "http://x.example/m.gguf"], "sets --model-url in extra_args"),
        (["-m", "OTHER.gguf"], "sets -m in extra_args"),
        (["-c", "65536"], "sets -c in extra_args"),
        (["--cors-origins", "*"], "sets --cors-origins in extra_args"),
        (["--models-dir", "/srv"], "sets --models-dir in extra_args"),
    ],
)
def test_a_second_member_passes_the_single_service_refusals(
    tmp_path: Path, words: list[str], expected: str
) -> None:
    data = group_data(8090)
    data["services"][BIG]["extra_args"] = words  # not the member the unit is described by
    message = _render(tmp_path, data)
    assert expected in message and f"service {BIG!r}" in message
    assert "sk-hidden-value" not in message


def test_the_same_refusal_for_the_cli_and_nothing_is_written(tmp_path: Path, cli: Cli) -> None:
    data = group_data(8090)
    data["services"][BIG]["extra_args"] = ["--hf-repo", "someone/any-GGUF:Q4_K_M"]
    fleet_file = write(tmp_path / "fleet" / "fleet.yaml", data)
    out = tmp_path / "out"
    result = cli("render", "-f", str(fleet_file), "--out", str(out), "--no-check")
    assert result.code == 2, result.stdout + result.stderr
    assert "--hf-repo" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()  # nothing rendered


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("adapter#b.gguf", "'#'"),
        ("adapter;b.gguf", "';'"),
        (" adapter.gguf", "surrounding blanks"),
        ("adapter.gguf ", "surrounding blanks"),
    ],
)
def test_a_preset_value_the_ini_reader_would_cut_is_refused(
    tmp_path: Path, value: str, why: str
) -> None:
    # llama.cpp's preset reader (common/preset.cpp) ends a value at ';' or '#' and
    # trims blanks; it has no quoting: the router would open "adapter" instead.
    data = group_data(8090)
    data["services"][SMALL]["extra_args"] = ["--lora", value]
    message = _render(tmp_path, data)
    assert "cannot be written to a llama.cpp preset file" in message and why in message


def test_a_model_file_with_a_hash_is_refused_in_a_group(tmp_path: Path) -> None:
    data = group_data(8090)
    data["models"]["gemma3-270m"]["files"][0]["path"] = "a#b.gguf"
    message = _render(tmp_path, data)
    assert "a#b.gguf" in message and "'#'" in message


def test_a_member_alias_cannot_be_the_global_section(tmp_path: Path) -> None:
    data = group_data(8090)
    data["services"][BIG]["alias"] = "*"
    assert "cannot name a preset section" in _render(tmp_path, data)


@pytest.mark.parametrize("where", ["bind", "proxy"])
def test_check_refuses_a_router_reachable_other_than_through_the_gateway(
    tmp_path: Path, cli: Cli, where: str
) -> None:
    data = group_data(8090)
    if where == "bind":
        for member in (SMALL, BIG):
            data["services"][member]["bind"] = "0.0.0.0"
            data["services"][member]["exposure"] = {"level": "lan", "reason": "the team"}
    else:
        data["proxy"] = {
            "host": "local",
            "bind": "127.0.0.1",
            "port": 8443,
            "exposure": {"level": "lan", "reason": "clients on the LAN"},
            "auth": "bearer",
            "keys_env": str(tmp_path / "keys.env"),
            "services": [SMALL],
        }
    fleet_file = write(tmp_path / "fleet.yaml", data)
    result = cli("check", str(fleet_file), "--json")
    found = [f for f in result.document()["findings"] if f["rule"] == "router-beyond-gateway"]
    assert found, result.stdout
    assert "management routes" in found[0]["message"]
    assert result.code == 1
    if where == "bind":
        # And the launch itself is refused, whether or not check ran.
        loaded = load_fleet(fleet_file)
        with pytest.raises(UsageError, match="beyond loopback"):
            render_fleet(loaded, GROUP)


def test_presets_are_installed_owner_only(tmp_path: Path) -> None:
    from inferfleet.deploy.execute import OWNER_ONLY_KINDS, SETTINGS_MODE

    loaded = load_fleet(write(tmp_path / "fleet.yaml", group_data(8090)))
    facts = default_facts(loaded.fleet.hosts["local"])
    launch = service_launch(loaded.fleet, loaded.root, GROUP, facts)
    [preset] = [f for f in launch.files if f.kind == "preset"]
    assert preset.kind in OWNER_ONLY_KINDS and stat.S_IMODE(SETTINGS_MODE) == 0o600
