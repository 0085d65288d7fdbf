"""CLI start-up: only the invoked verb's modules load; heavy libraries only where used.

Speed itself is measured by benchmarks/cli_startup.py; these tests pin what is
imported, in a fresh interpreter running the real entry point.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main
from helpers.imports import imported_by

from inferfleet.cli.app import VERBS, build_app

HEAVY = ("matplotlib", "huggingface_hub", "starlette", "uvicorn", "psutil")


def cli_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("inferfleet.cli.") and m != "inferfleet.cli.app"}


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


@pytest.mark.parametrize("args", [("--help",), (), ("--version",), ("no-such-verb",)])
def test_the_verb_list_imports_no_verb_module(args: tuple[str, ...]) -> None:
    modules = imported_by(*args, ok=False)
    assert cli_modules(modules) == set()
    assert heavy(modules) == set()
    assert "httpx" not in modules
    assert not {
        m for m in modules if m.startswith(("inferfleet.fleetfile", "inferfleet.documents"))
    }
    if args in (("--help",), ("--version",)):
        # (Typer itself imports pydantic to report a usage error.)
        assert "pydantic" not in modules


def test_a_verb_imports_only_its_own_module() -> None:
    modules = imported_by("status", "--help")
    assert cli_modules(modules) == {"inferfleet.cli.run_cmds", "inferfleet.cli.fleet_cmds"}
    assert heavy(modules) == set()
    assert "inferfleet.deploy.local" not in modules


def test_validate_reads_the_fleet_without_the_launch_machinery(tmp_path: Path) -> None:
    fleet = Path(__file__).parents[2] / "examples" / "local" / "fleet.yaml"
    modules = imported_by("validate", str(fleet))
    assert "inferfleet.fleetfile.fleet" in modules  # the fleet is read: its model loads
    assert heavy(modules) == set()
    assert not {m for m in modules if m.startswith(("inferfleet.render", "inferfleet.deploy"))}


def test_the_registry_help_is_each_verbs_own_help() -> None:
    # The verb list is printed from app.py's registry without importing the
    # verbs: each line must be the first line of the verb's own help.
    group = typer.main.get_command(build_app(full=True))
    commands = getattr(group, "commands", {})
    assert sorted(commands) == sorted(VERBS)
    for name, entry in VERBS.items():
        command = commands[name]
        own = " ".join((command.help or "").split("\n\n")[0].split())
        assert own == entry.help, name
