"""Models used in place from the Hugging Face cache.

The cache is made by huggingface_hub itself (``hf_hub_download`` against the
Hub-shaped test server on loopback), never by hand. inferfleet runs as a real
process (``python -m inferfleet``), so huggingface_hub reads HF_HOME and
HF_HUB_OFFLINE from the environment exactly as it does for a user.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hf_env import hf_environment, hub_cache, run
from hub_repos import Blobs, small_repo
from hubserver import HubServer

REPO = "test/small"
MODEL = "model-small.gguf"


@pytest.fixture
def env(tmp_path: Path, hub: HubServer) -> dict[str, str]:
    return hf_environment(tmp_path, hub)


@pytest.fixture
def repo(hub: HubServer) -> str:
    """The test repo's commit."""
    return hub.add(small_repo(REPO)).commit


def fleet(tmp_path: Path, commit: str, model_blobs: Blobs, *, hf_cache: object = None) -> Path:
    source: dict[str, Any] = {"hub": REPO, "revision": commit}
    model: dict[str, Any] = {
        "source": source,
        "files": [
            {"path": MODEL, "size": model_blobs.small.size, "sha256": model_blobs.small.sha256}
        ],
    }
    if hf_cache is None:
        model["dir"] = str(tmp_path / "models" / "m")
    else:
        source["hf_cache"] = hf_cache
    data = {"version": 1, "hosts": {"local": {"address": "localhost"}}, "models": {"m": model}}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def download_with_huggingface_hub(tmp_path: Path, hub: HubServer, commit: str) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(
        hf_hub_download(
            REPO,
            MODEL,
            revision=commit,
            cache_dir=hub_cache(tmp_path),
            endpoint=hub.endpoint,
            token=False,
        )
    )


def test_a_model_in_the_hf_cache_is_verified_in_place_never_copied_and_checked_by_stat_after(
    tmp_path: Path, hub: HubServer, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    """L-01 (sha256 in place), L-08 (the second check is stat + record), never a copy."""
    from huggingface_hub import snapshot_download

    cached = download_with_huggingface_hub(tmp_path, hub, repo)
    snapshot = snapshot_download(
        REPO, revision=repo, cache_dir=hub_cache(tmp_path), local_files_only=True
    )
    fleet(tmp_path, repo, model_blobs, hf_cache=str(hub_cache(tmp_path)))
    requests = len(hub.log)

    first = run(env, tmp_path, "models", "verify", "m", "--json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["ok"] and doc["folder"] == snapshot
    assert [f["method"] for f in doc["files"]] == ["sha256"]

    second = run(env, tmp_path, "models", "verify", "m", "--json")
    assert second.returncode == 0, second.stderr
    assert [f["method"] for f in json.loads(second.stdout)["files"]] == ["record"]

    assert len(hub.log) == requests  # no request at all
    # In place: the snapshot link still points at huggingface_hub's one blob ...
    assert (Path(snapshot) / MODEL).resolve() == cached.resolve()
    assert cached.resolve().stat().st_nlink == 1
    # ... no copy in inferfleet's model store, and nothing of ours in the HF cache.
    assert not (tmp_path / "cache" / "models").exists()
    ours = [p for p in hub_cache(tmp_path).rglob("*") if "inferfleet" in p.name]
    assert ours == []
    assert list((tmp_path / "cache" / "hf-cache-verified").rglob("*.json"))


def test_true_means_huggingface_hub_default_cache_and_a_wrong_one_says_where_files_are(
    tmp_path: Path, hub: HubServer, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    download_with_huggingface_hub(tmp_path, hub, repo)
    fleet(tmp_path, repo, model_blobs, hf_cache=True)
    env = {**env, "HOME": str(tmp_path / "home")}
    result = run(env, tmp_path, "models", "verify", "m")
    assert result.returncode == 1
    assert "not on disk" in result.stdout + result.stderr
    assert f"write hf_cache: {hub_cache(tmp_path)}" in " ".join(result.stderr.split())


def test_a_corrupted_blob_in_the_cache_is_refused_naming_the_file_and_the_fix(
    tmp_path: Path, hub: HubServer, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    """L-01: same size, one byte changed in the blob; refused, never recorded."""
    cached = download_with_huggingface_hub(tmp_path, hub, repo)
    fleet(tmp_path, repo, model_blobs, hf_cache=str(hub_cache(tmp_path)))
    assert run(env, tmp_path, "models", "verify", "m").returncode == 0
    blob = cached.resolve()
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))

    result = run(env, tmp_path, "models", "verify", "m")
    text = " ".join(result.stderr.split())
    assert result.returncode == 1
    assert f"{MODEL}: sha256" in text and "declared (L-01)" in text
    assert "hf cache delete" in text and "inferfleet models fetch m" in text
    assert "Traceback" not in result.stderr
    # The wrong bytes are not vouched for: the next check hashes again and refuses again.
    assert run(env, tmp_path, "models", "verify", "m").returncode == 1


def test_fetch_of_an_hf_cache_model_downloads_into_the_cache_once(
    tmp_path: Path, hub: HubServer, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    from huggingface_hub import try_to_load_from_cache

    fleet(tmp_path, repo, model_blobs, hf_cache=str(hub_cache(tmp_path)))
    fetched = run(env, tmp_path, "models", "fetch", "m", "--json")
    assert fetched.returncode == 0, fetched.stderr
    doc = json.loads(fetched.stdout)
    assert doc["fetched_bytes"] == model_blobs.small.size and doc["ok"]
    found = try_to_load_from_cache(REPO, MODEL, cache_dir=hub_cache(tmp_path), revision=repo)
    assert isinstance(found, str) and Path(found).stat().st_size == model_blobs.small.size
    assert not (tmp_path / "cache" / "models").exists()

    requests = len(hub.log)
    again = run(env, tmp_path, "models", "fetch", "m", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reused_bytes"] == model_blobs.small.size
    assert len(hub.log) == requests  # verified in place: no request


def test_fetch_into_hf_cache_lets_huggingface_hub_find_the_files(
    tmp_path: Path, hub: HubServer, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    from huggingface_hub import try_to_load_from_cache

    fleet(tmp_path, repo, model_blobs)  # a plain hub model with its own dir
    result = run(env, tmp_path, "models", "fetch", "m", "--into-hf-cache")
    assert result.returncode == 0, result.stderr
    assert "hf_cache:" in result.stdout
    found = try_to_load_from_cache(REPO, MODEL, cache_dir=hub_cache(tmp_path), revision=repo)
    assert isinstance(found, str)
    assert not (tmp_path / "models").exists()  # not also in the model's dir


def test_hf_hub_offline_is_honoured_with_zero_requests_and_a_clear_error(
    tmp_path: Path, hub: HubServer, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    fleet(tmp_path, repo, model_blobs, hf_cache=str(hub_cache(tmp_path)))
    result = run({**env, "HF_HUB_OFFLINE": "1"}, tmp_path, "models", "fetch", "m")
    text = " ".join(result.stderr.split())
    assert result.returncode != 0
    assert "HF_HUB_OFFLINE is set" in text and MODEL in text
    assert hub.log == []
    assert not hub_cache(tmp_path).exists() or not list(hub_cache(tmp_path).rglob(MODEL))


def test_hf_cache_needs_a_commit_and_no_dir(
    tmp_path: Path, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    path = fleet(tmp_path, "main", model_blobs, hf_cache=True)
    result = run(env, tmp_path, "validate", str(path))
    assert result.returncode == 2 and "40-character" in result.stderr
    data = yaml.safe_load(path.read_text())
    data["models"]["m"]["source"]["revision"] = repo
    data["models"]["m"]["dir"] = "/tmp/x"
    path.write_text(yaml.safe_dump(data))
    result = run(env, tmp_path, "validate", str(path))
    assert result.returncode == 2 and "drop dir:" in result.stderr


def test_fragments_cannot_live_in_the_hf_cache_and_nothing_is_downloaded(
    tmp_path: Path, hub: HubServer, model_blobs: Blobs, env: dict[str, str]
) -> None:
    """L-05: a file assembled from .partNofM fragments is not a repo file; refused up front."""
    from hub_repos import fragment_repo

    commit = hub.add(fragment_repo()).commit
    listed = run(env, tmp_path, "models", "manifest", "test/gemma-parts", "-o", "m.manifest")
    assert listed.returncode == 0, listed.stderr
    data = {
        "version": 1,
        "hosts": {"local": {"address": "localhost"}},
        "models": {
            "m": {
                "source": {"hub": "test/gemma-parts", "revision": commit, "hf_cache": True},
                "manifest": "m.manifest",
            }
        },
    }
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(data))
    requests = len(hub.log)
    result = run(env, tmp_path, "models", "fetch", "m")
    text = " ".join(result.stderr.split())
    assert result.returncode == 1
    assert "assembled from .partNofM fragments (L-05)" in text and "drop hf_cache" in text
    assert len(hub.log) == requests
    assert not hub_cache(tmp_path).exists()


def test_a_relative_hf_cache_path_is_refused(
    tmp_path: Path, repo: str, model_blobs: Blobs, env: dict[str, str]
) -> None:
    path = fleet(tmp_path, repo, model_blobs, hf_cache="hf/hub")
    result = run(env, tmp_path, "validate", str(path))
    assert result.returncode == 2 and "absolute path" in result.stderr
