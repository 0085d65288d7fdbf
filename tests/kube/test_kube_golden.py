"""Golden manifests of the homelab example, and byte-stable output.

Reviewers read the golden diff. To accept an intended change, rerun with
``INFERFLEET_UPDATE_GOLDEN=1`` and commit the updated files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from helpers.cli import CliResult
from kube_helpers import GOLDEN, HOMELAB, render

UPDATE = os.environ.get("INFERFLEET_UPDATE_GOLDEN") == "1"


def test_homelab_manifests_match_their_golden_files() -> None:
    folder = GOLDEN / "homelab"
    expected = {a.path: a.content for a in render()}
    if UPDATE:
        for path, content in expected.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert on_disk == set(expected), "golden files and rendered manifests differ in names"
    for path, content in expected.items():
        assert content == (folder / path).read_text(encoding="utf-8"), f"{path} differs"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_two_renders_write_the_same_bytes(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    trees = []
    for run in ("a", "b"):
        out = tmp_path / run
        result = cli(
            "render", "-f", str(HOMELAB), "--target", "kubernetes", "--out", str(out), "--no-check"
        )
        assert result.code == 0, result.stderr
        trees.append(_tree(out))
    assert trees[0] == trees[1]
    assert "kustomization.yaml" in trees[0] and "MANIFEST.json" in trees[0]
    assert trees[0]["services/chat.yaml"] == (GOLDEN / "homelab/services/chat.yaml").read_bytes()


def test_namespace_option_moves_every_object() -> None:
    artifacts = render(namespace="llm-prod")
    text = "".join(a.content for a in artifacts)
    assert "namespace: inferfleet\n" not in text
    assert (
        "namespace: llm-prod"
        in next(a for a in artifacts if a.path == "kustomization.yaml").content
    )
