"""`render --target llama-swap` of the example fleets: golden files, and what it leaves out.

To accept an intended change, rerun with ``INFERFLEET_UPDATE_GOLDEN=1`` and
commit the updated files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from helpers.cli import CliResult
from render_helpers import FLEETS, ROOT, load

from inferfleet.importers.commandline import split_command
from inferfleet.render.facts import facts_for
from inferfleet.render.llamaswap import render_llama_swap
from inferfleet.render.pipeline import service_launch

GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "llama-swap"
UPDATE = os.environ.get("INFERFLEET_UPDATE_GOLDEN") == "1"


def configs(fleet: str) -> dict[str, str]:
    loaded = load(fleet)
    facts = facts_for(loaded.fleet, fleet_subdir=loaded.repo_subdir)
    hosts = sorted({s.host for s in loaded.fleet.services.values()})
    found = {}
    for host in hosts:
        config = render_llama_swap(
            loaded.fleet, loaded.root, host, facts[host], origin="fleet.yaml"
        )
        if config.text:  # a host with container services only has none
            found[host] = config.text
    return found


@pytest.mark.parametrize("fleet", ["local", "homelab"])
def test_llama_swap_config_matches_its_golden_file(fleet: str) -> None:
    rendered = configs(fleet)
    assert rendered
    folder = GOLDEN / fleet
    if UPDATE:
        for host, text in rendered.items():
            (folder / host).mkdir(parents=True, exist_ok=True)
            (folder / host / "config.yaml").write_text(text, encoding="utf-8")
    on_disk = {p.parent.name for p in folder.rglob("config.yaml")}
    assert on_disk == set(rendered)
    for host, text in rendered.items():
        assert text == (folder / host / "config.yaml").read_text(encoding="utf-8"), host


def test_each_cmd_is_the_launch_argv_with_the_port_left_to_llama_swap() -> None:
    loaded = load("local")
    facts = facts_for(loaded.fleet, fleet_subdir=loaded.repo_subdir)
    data = yaml.safe_load(configs("local")["local"])
    for name, entry in data["models"].items():
        launch = service_launch(loaded.fleet, loaded.root, name, facts["local"])
        port = str(loaded.fleet.services[name].port)
        expected = [("${PORT}" if w == port else w) for w in launch.argv]
        assert split_command(entry["cmd"]) == expected
        assert entry["checkEndpoint"] == loaded.fleet.services[name].health.path
    assert data["startPort"] == min(s.port for s in loaded.fleet.services.values())
    assert FLEETS["local"].exists()


def test_render_cli_writes_one_config_per_host_and_lists_what_is_left_out(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    result = cli(
        "render", "--target", "llama-swap", "-f", str(FLEETS["homelab"]), "--out",
        str(tmp_path), "--no-check",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("config.yaml"))
    assert written == ["llama-swap/forge/config.yaml", "llama-swap/nova/config.yaml"]
    assert "chat: runs in a container; llama-swap starts processes (left out)" in result.stderr
