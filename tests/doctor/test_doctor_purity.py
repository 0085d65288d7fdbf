"""doctor.parse and doctor.findings are pure: only doctor.facts runs commands, reads files."""

from __future__ import annotations

from helpers import ROOT
from layering.import_graph import ImportGraph

EFFECTS = ("subprocess", "socket", "httpx", "psutil", "uvicorn", "inferfleet.io", "shutil", "os")


def test_parse_and_findings_import_no_effect() -> None:
    graph = ImportGraph.scan(ROOT / "src", "inferfleet")
    assert graph.effect_chains(("doctor",), EFFECTS, ("inferfleet.doctor.facts",)) == []
    # and the walk does see the effects of the facts module itself
    assert graph.effect_chains(("doctor",), EFFECTS, ())
