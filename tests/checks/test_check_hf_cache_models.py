"""Models used in place from the Hugging Face cache share its snapshot folder by design:
two quants of one repo at one commit are not a model-dir-shared collision (L-09), but the
same file declared with different bytes still is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from check_helpers import Patch, build

S = "services"
CACHED = {"hub": "example/models", "revision": "0" * 40, "hf_cache": True}


def cached_model(name: str, size: int) -> dict[str, Any]:
    return {"source": CACHED, "files": [{"path": name, "size": size}]}


def shared(cli: Any, tmp_path: Path, patch: Patch) -> list[dict[str, Any]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    result = cli("check", str(path), "--json")
    assert result.code in (0, 1), result.stderr
    return [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "model-dir-shared"]


def test_two_quants_of_one_cached_repo_share_the_snapshot(cli: Any, tmp_path: Path) -> None:
    other = dict(build()[S]["chat"], model="d", port=8081, devices=["g1"], alias="other")
    patch: Patch = {
        "models.m": cached_model("a-Q4_K_M.gguf", 100),
        "models.d": cached_model("a-Q8_0.gguf", 200),
        f"{S}.other": other,
    }
    assert shared(cli, tmp_path / "a", patch) == []
    patch["models.d"] = cached_model("a-Q4_K_M.gguf", 300)  # one path, two sizes: a real clash
    (hit,) = shared(cli, tmp_path / "b", patch)
    assert "both declare a-Q4_K_M.gguf with different sizes" in hit["message"]
    assert "/snapshots/" + "0" * 40 in hit["message"]
