"""`inferfleet import` of a `-hf REPO:TAG` server against the test Hub, and offline.

Run as a user runs it (a subprocess: huggingface_hub reads HF_* at import).
Online, the multi-file quant's manifest is listed (every part, sizes and
sha256), written next to the fleet file, its revision pinned to the commit,
and the imported service's argv checked; offline, the model is marked to
resolve and nothing but the fleet file is written.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from hf_env import hf_environment, run
from hub_repos import split_repo
from hubserver import HubServer

from inferfleet.artifacts.manifest import parse_manifest

CONFIG = """\
models:
  "gemma":
    cmd: |
      /opt/llama/llama-server --port ${PORT}
      -hf test/gemma-split:q4_k_m
      -c 4096 -np 2
"""


def test_a_hub_quant_is_listed_pinned_and_checked(hub: HubServer, tmp_path: Path) -> None:
    repo = hub.add(split_repo())
    (tmp_path / "config.yaml").write_text(CONFIG)
    done = run(hf_environment(tmp_path, hub), tmp_path, "import", "llama-swap", "config.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert f"listed on the Hub at {repo.commit}" in said
    assert "same argv gemma" in said
    data = yaml.safe_load((tmp_path / "fleet.yaml").read_text())
    model = data["models"][data["services"]["gemma"]["model"]]
    assert model["source"] == {"hub": "test/gemma-split", "revision": repo.commit}
    manifest = parse_manifest(tmp_path / model["manifest"])
    parts = sorted(p for p in repo.files if p.endswith(".gguf"))
    assert sorted(e.path for e in manifest.entries) == parts and len(parts) == 3
    assert all(e.kind == "sha256" for e in manifest.entries)


def test_offline_the_hub_model_is_marked_to_resolve(hub: HubServer, tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    env = {**hf_environment(tmp_path, hub), "HF_HUB_OFFLINE": "1"}
    done = run(env, tmp_path, "import", "llama-swap", "config.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "HF_HUB_OFFLINE is set; marked to resolve" in said
    assert "inferfleet models manifest test/gemma-split:q4_k_m --out models/" in said
    assert "not resolved yet" in said
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "hf") == [
        "config.yaml",
        "fleet.yaml",
    ]
    assert hub.log == []  # offline means no request at all
