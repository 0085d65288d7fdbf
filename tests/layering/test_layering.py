"""The layout's two import rules hold for src/inferfleet (design.md).

1. No import cycle between inferfleet's packages (imports inside functions
   count: they tie the packages together all the same).
2. The pure core (fleet file model, GGUF parsing, budget, runtime adapters,
   render, checks) imports no effect, directly or through any inferfleet
   module it imports.

Both rules are also shown failing, on small package trees planted in tmp_path,
so a reader sees what a violation looks like and that the checker catches it.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from helpers import ROOT
from import_graph import ImportGraph

SRC = ROOT / "src"
PACKAGE = "inferfleet"

# The pure core: parsing, sizing, argv building, rendering and rules, all over data.
CORE = ("fleetfile", "gguf", "budget", "runtimes", "render", "checks")

# Effects: processes, sockets, HTTP, process tables, servers, and inferfleet's own
# effects layer (process runner, HTTP client, atomic files, pid identity). The core
# writes no file either: rendered artifacts are returned as data and written by the
# CLI and deploy, so inferfleet.io.files is not allowed into the core.
EFFECTS = ("subprocess", "socket", "httpx", "psutil", "uvicorn", f"{PACKAGE}.io")

# The one sanctioned effect inside the core: the GGUF reader's HTTP byte source, so
# that `gguf inspect URL` reads a remote header with Range requests. The walk stops
# there: what it imports (httpx, inferfleet.io.http) is its business.
ALLOWED = (f"{PACKAGE}.gguf.source",)


def check(src: Path) -> tuple[list[str], list[str]]:
    graph = ImportGraph.scan(src, PACKAGE)
    return graph.cycles(), graph.effect_chains(CORE, EFFECTS, ALLOWED)


def plant(src: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return src


def test_src_has_no_package_import_cycle() -> None:
    cycles, _ = check(SRC)
    assert not cycles, "\n\n".join(cycles)


def test_the_pure_core_imports_no_effect() -> None:
    _, effects = check(SRC)
    assert not effects, "\n\n".join(effects)


def test_a_planted_cycle_is_reported_with_the_imports_that_make_it(tmp_path: Path) -> None:
    src = plant(
        tmp_path / "src",
        {
            "inferfleet/__init__.py": "",
            "inferfleet/errors.py": "class FleetError(Exception): ...\n",
            "inferfleet/hub/__init__.py": "",
            "inferfleet/hub/fetch.py": """
                from inferfleet.errors import FleetError
                from inferfleet.models.artifacts import verify
            """,
            "inferfleet/models/__init__.py": "",
            "inferfleet/models/artifacts.py": """
                from typing import TYPE_CHECKING

                if TYPE_CHECKING:  # never runs: not an edge
                    from inferfleet.deploy import state

                def verify():
                    # inside a function, and relative: still an edge (models -> hub)
                    from ..hub import fetch
                    return fetch
            """,
            "inferfleet/deploy/__init__.py": "",
            "inferfleet/deploy/state.py": "from inferfleet.models import artifacts\n",
        },
    )
    cycles, effects = check(src)
    assert effects == []
    assert cycles == [
        "package import cycle hub -> models -> hub\n"
        "  hub -> models: inferfleet/hub/fetch.py:2 imports inferfleet.models\n"
        "  models -> hub: inferfleet/models/artifacts.py:8 imports inferfleet.hub"
    ]


def test_a_three_package_cycle_names_every_hop(tmp_path: Path) -> None:
    src = plant(
        tmp_path / "src",
        {
            "inferfleet/__init__.py": "",
            "inferfleet/deploy/__init__.py": "from inferfleet.probe import contract\n",
            "inferfleet/probe/contract.py": "import inferfleet.bench.runner\n",
            "inferfleet/bench/runner.py": "from inferfleet import deploy\n",
        },
    )
    cycles, _ = check(src)
    assert cycles == [
        "package import cycle bench -> deploy -> probe -> bench\n"
        "  bench -> deploy: inferfleet/bench/runner.py:1 imports inferfleet.deploy\n"
        "  deploy -> probe: inferfleet/deploy/__init__.py:1 imports inferfleet.probe.contract\n"
        "  probe -> bench: inferfleet/probe/contract.py:1 imports inferfleet.bench.runner"
    ]


def test_a_planted_effect_in_the_core_is_reported_with_its_import_chain(tmp_path: Path) -> None:
    src = plant(
        tmp_path / "src",
        {
            "inferfleet/__init__.py": "",
            # Directly: a core module running a process.
            "inferfleet/render/__init__.py": "",
            "inferfleet/render/systemd.py": """
                import shlex

                def verify(unit):
                    import subprocess
                    return subprocess.run(["systemd-analyze", "verify", unit])
            """,
            # Transitively: the core imports a module outside it that uses the effects layer.
            "inferfleet/budget/__init__.py": "",
            "inferfleet/budget/plan.py": "from inferfleet.models.artifacts import main_file\n",
            "inferfleet/models/__init__.py": "",
            "inferfleet/models/artifacts.py": """
                from inferfleet.io.files import atomic_write

                def main_file(): ...
            """,
            "inferfleet/io/__init__.py": "",
            "inferfleet/io/files.py": "import os\n",
            # The allow-listed byte source may use HTTP; importing it is no violation.
            "inferfleet/gguf/__init__.py": "from inferfleet.gguf.source import open_source\n",
            "inferfleet/gguf/source.py": "import httpx\n\ndef open_source(): ...\n",
        },
    )
    cycles, effects = check(src)
    assert cycles == []
    assert effects == [
        "the pure core imports the effect inferfleet.io (inferfleet/models/artifacts.py:1): "
        "inferfleet.budget.plan -> inferfleet.models.artifacts -> inferfleet.io\n"
        "    inferfleet/budget/plan.py:1: "
        "inferfleet.budget.plan imports inferfleet.models.artifacts\n"
        "    inferfleet/models/artifacts.py:1: inferfleet.models.artifacts imports inferfleet.io",
        "the pure core imports the effect subprocess (inferfleet/render/systemd.py:4): "
        "inferfleet.render.systemd -> subprocess\n"
        "    inferfleet/render/systemd.py:4: inferfleet.render.systemd imports subprocess",
    ]


# Lower layers never import upper ones: README.md's package map (its architecture
# section) lists the packages lowest layer first, and that list is the total order.
# The entry point (``python -m inferfleet``) runs the CLI and sits above everything.
ENTRY = "__main__"


def package_map(readme: str) -> list[str]:
    """The packages and top modules of the README's package map, in its order."""
    section = readme.split("\n## Architecture\n", 1)[-1]
    block = section.split("\nsrc/inferfleet/", 1)[-1].split("```", 1)[0]
    return re.findall(r"^  (\w+)(?:/|\.py) ", block, flags=re.M)


def order_violations(graph: ImportGraph, order: list[str]) -> list[str]:
    """One line per import of a package listed later than the importer (or not listed)."""
    rank = {unit: index for index, unit in enumerate(order)}
    units = {graph.unit(m) for m in graph.modules} - {None, ENTRY}
    wrong = [f"{unit} is not in README.md's package map" for unit in sorted(units - set(rank))]
    for low, highs in sorted(graph.unit_edges().items()):
        for high, imp in sorted(highs.items()):
            if low in rank and high in rank and rank[high] > rank[low]:
                wrong.append(
                    f"{low} imports {high}, a higher layer (listed after it in README.md's "
                    f"package map): {imp.where(graph.root)} imports {imp.target}"
                )
    return wrong


def test_the_readme_lists_every_package_once() -> None:
    order = package_map((ROOT / "README.md").read_text(encoding="utf-8"))
    graph = ImportGraph.scan(SRC, PACKAGE)
    units = {graph.unit(m) for m in graph.modules}
    assert len(order) == len(set(order)), order
    assert set(order) == units - {None, ENTRY}


def test_no_package_imports_one_listed_after_it_in_the_readme() -> None:
    order = package_map((ROOT / "README.md").read_text(encoding="utf-8"))
    wrong = order_violations(ImportGraph.scan(SRC, PACKAGE), order)
    assert not wrong, "\n".join(wrong)


def test_an_upward_import_and_an_unlisted_package_are_reported(tmp_path: Path) -> None:
    src = plant(
        tmp_path / "src",
        {
            "inferfleet/__init__.py": "",
            "inferfleet/errors.py": "",
            "inferfleet/client/__init__.py": "",
            "inferfleet/client/target.py": """
                from typing import TYPE_CHECKING

                from inferfleet.errors import FleetError

                if TYPE_CHECKING:  # never runs: not an edge
                    from inferfleet.deploy import state

                def url():
                    from inferfleet.backends.health import url_for  # upward, in a function
            """,
            "inferfleet/backends/__init__.py": "",
            "inferfleet/backends/health.py": "",
            "inferfleet/deploy/__init__.py": "from inferfleet import client, backends\n",
            "inferfleet/extra.py": "",
        },
    )
    readme = (
        "# x\n\n## Architecture\n\n```\nsrc/inferfleet/\n"
        "  errors.py          the errors\n"
        "  client/            the client\n"
        "                     continued: not a row\n"
        "  backends/          backends\n"
        "  deploy/            deploy\n"
        "tests/<topic>/       not a package\n```\n"
    )
    order = package_map(readme)
    assert order == ["errors", "client", "backends", "deploy"]
    assert order_violations(ImportGraph.scan(src, PACKAGE), order) == [
        "extra is not in README.md's package map",
        "client imports backends, a higher layer (listed after it in README.md's "
        "package map): inferfleet/client/target.py:9 imports inferfleet.backends",
    ]
