"""artifacts sits below hub: it never imports the Hub package, so there is no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import inferfleet.artifacts

PACKAGE = Path(inferfleet.artifacts.__file__).parent


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_artifacts_imports_neither_hub_nor_anything_above_it() -> None:
    above = ("inferfleet.hub", "inferfleet.deploy", "inferfleet.cli", "inferfleet.render")
    for path in sorted(PACKAGE.glob("*.py")):
        bad = sorted(n for n in imported(path) if n.startswith(above))
        assert bad == [], f"{path.name} imports {bad}"
