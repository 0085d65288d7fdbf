"""doctor is pure (parse, findings); backends.host_facts runs the commands and reads the files."""

from __future__ import annotations

from helpers import ROOT
from layering.import_graph import ImportGraph

EFFECTS = ("subprocess", "socket", "httpx", "psutil", "uvicorn", "inferfleet.io", "shutil", "os")


def test_parse_and_findings_import_no_effect() -> None:
    graph = ImportGraph.scan(ROOT / "src", "inferfleet")
    assert graph.effect_chains(("doctor",), EFFECTS, ()) == []
    # and the walk does see the effects of the module that gathers the facts
    assert graph.effect_chains(("backends",), EFFECTS, ())
