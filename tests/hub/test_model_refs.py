"""``gguf inspect`` and ``models manifest`` take REPO, REPO:FILE, hf://REPO/FILE@REV and a
folder; a file in the Hugging Face cache is read there with no request,
and HF_HUB_OFFLINE means no request at all (counted on the test Hub).

The cache is made by huggingface_hub itself against the Hub-shaped test server;
inferfleet runs as a real process so huggingface_hub reads HF_HOME and
HF_HUB_OFFLINE from the environment as it does for a user.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hf_env import hf_environment, hub_cache, run
from hub_repos import MODEL_NAME, Blobs, split_repo, whole_repo
from hubserver import HubServer

WHOLE = "test/gemma-whole"
SPLIT = "test/gemma-split"
PART1 = "gemma-3-270m-q4_k_m-00001-of-00003.gguf"


@pytest.fixture
def env(tmp_path: Path, hub: HubServer) -> dict[str, str]:
    return hf_environment(tmp_path, hub)


@pytest.fixture
def repos(hub: HubServer) -> dict[str, str]:
    return {r.repo_id: r.commit for r in (hub.add(whole_repo(WHOLE)), hub.add(split_repo(SPLIT)))}


def cache_whole(tmp_path: Path, hub: HubServer, commit: str) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(
        hf_hub_download(
            WHOLE,
            MODEL_NAME,
            revision=commit,
            cache_dir=hub_cache(tmp_path),
            endpoint=hub.endpoint,
            token=False,
        )
    )


def inspected(env: dict[str, str], cwd: Path, what: str) -> dict[str, object]:
    result = run(env, cwd, "gguf", "inspect", what, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["architecture"] == "gemma3"
    return doc


@pytest.mark.parametrize(
    "form", ["{repo}:{file}", "hf://{repo}/{file}", "hf://{repo}/{file}@{commit}"]
)
def test_a_cached_hub_file_is_inspected_in_the_cache_with_no_request(
    tmp_path: Path, hub: HubServer, repos: dict[str, str], env: dict[str, str], form: str
) -> None:
    cached = cache_whole(tmp_path, hub, "main")
    requests = len(hub.log)
    what = form.format(repo=WHOLE, file=MODEL_NAME, commit=repos[WHOLE])
    doc = inspected(env, tmp_path, what)
    assert doc["location"] == str(cached)
    assert len(hub.log) == requests
    offline = inspected({**env, "HF_HUB_OFFLINE": "1"}, tmp_path, what)
    assert offline["location"] == str(cached)
    assert len(hub.log) == requests


def test_an_uncached_file_is_read_by_range_over_http_header_only(
    tmp_path: Path, hub: HubServer, repos: dict[str, str], model_blobs: Blobs, env: dict[str, str]
) -> None:
    """L-11: the header only, never the tensor data; nothing lands in the cache."""
    doc = inspected(env, tmp_path, f"hf://{WHOLE}/{MODEL_NAME}@{repos[WHOLE]}")
    assert str(doc["location"]).startswith(hub.endpoint)
    assert f"/resolve/{repos[WHOLE]}/" in str(doc["location"])
    assert sum(hub.sent.values()) < model_blobs.whole.size // 4
    assert not hub_cache(tmp_path).exists()


def test_a_repo_alone_or_with_a_tag_inspects_its_model_gguf_part_1_of_a_split(
    tmp_path: Path, hub: HubServer, repos: dict[str, str], env: dict[str, str]
) -> None:
    """L-04: part 1 names the others; the repo's listing picks it."""
    doc = inspected(env, tmp_path, SPLIT)
    assert str(doc["location"]).endswith(PART1)
    assert doc["split"]["count"] == 3  # type: ignore[index]
    tagged = inspected(env, tmp_path, f"{SPLIT}:q4_k_m")
    assert str(tagged["location"]).endswith(PART1)
    missing = run(env, tmp_path, "gguf", "inspect", f"{SPLIT}:Q8_0")
    assert missing.returncode == 2
    assert "no GGUF file with 'Q8_0'" in missing.stderr and PART1 in missing.stderr


def test_a_folder_inspects_its_model_gguf_not_the_projector(
    tmp_path: Path, model_blobs: Blobs, env: dict[str, str]
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "mmproj-model-f16.gguf").symlink_to(model_blobs.model)
    (folder / "model.gguf").symlink_to(model_blobs.model)
    doc = inspected(env, tmp_path, str(folder))
    assert doc["location"] == str(folder / "model.gguf")


def test_a_cached_split_snapshot_folder_inspects_part_1(
    tmp_path: Path, hub: HubServer, repos: dict[str, str], env: dict[str, str]
) -> None:
    from huggingface_hub import hf_hub_download, snapshot_download

    for part in (1, 2, 3):
        hf_hub_download(
            SPLIT,
            PART1.replace("00001-of", f"0000{part}-of"),
            cache_dir=hub_cache(tmp_path),
            endpoint=hub.endpoint,
            token=False,
        )
    snapshot = snapshot_download(SPLIT, cache_dir=hub_cache(tmp_path), local_files_only=True)
    requests = len(hub.log)
    doc = inspected({**env, "HF_HUB_OFFLINE": "1"}, tmp_path, snapshot)
    assert doc["location"] == os.path.join(snapshot, PART1)
    assert doc["split"]["count"] == 3  # type: ignore[index]
    assert len(hub.log) == requests


def test_offline_without_the_file_in_the_cache_is_a_clear_error_and_no_request(
    tmp_path: Path, hub: HubServer, repos: dict[str, str], env: dict[str, str]
) -> None:
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    for what in (f"{WHOLE}:{MODEL_NAME}", SPLIT):
        result = run(offline, tmp_path, "gguf", "inspect", what)
        text = " ".join(result.stderr.split())
        assert result.returncode == 1, result.stderr
        assert "not in the Hugging Face cache and HF_HUB_OFFLINE is set" in text
        assert "hf download" in text and "Traceback" not in text
    result = run(offline, tmp_path, "models", "manifest", WHOLE)
    assert result.returncode == 1 and "HF_HUB_OFFLINE is set" in result.stderr
    assert hub.log == []


def test_models_manifest_takes_a_file_a_folder_and_the_cache_offline(
    tmp_path: Path, hub: HubServer, repos: dict[str, str], model_blobs: Blobs, env: dict[str, str]
) -> None:
    one = run(env, tmp_path, "models", "manifest", f"hf://{SPLIT}/{PART1}@{repos[SPLIT]}", "--json")
    assert one.returncode == 0, one.stderr
    doc = json.loads(one.stdout)
    assert doc["commit"] == repos[SPLIT]
    assert [f["path"][-19:] for f in doc["files"]] == [
        f"0000{n}-of-00003.gguf" for n in (1, 2, 3)
    ]  # every part of the split comes along (L-04)

    cached = cache_whole(tmp_path, hub, "main")  # huggingface_hub records refs/main
    requests = len(hub.log)
    offline = run(
        {**env, "HF_HUB_OFFLINE": "1"},
        tmp_path,
        "models",
        "manifest",
        f"{WHOLE}:{MODEL_NAME}",
        "--json",
    )
    assert offline.returncode == 0, offline.stderr
    doc = json.loads(offline.stdout)
    assert doc["commit"] == repos[WHOLE] and doc["repo"] == WHOLE
    assert doc["files"] == [
        {
            "path": MODEL_NAME,
            "size": model_blobs.whole.size,
            "kind": "sha256",
            "hash": model_blobs.whole.sha256,
        }
    ]
    assert len(hub.log) == requests

    folder = run(env, tmp_path, "models", "manifest", str(cached.parent), "--json")
    assert folder.returncode == 0, folder.stderr
    assert json.loads(folder.stdout)["files"] == doc["files"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("gguf", "inspect", "org/name:../secret.gguf"), "is not a file of a repo"),
        (("gguf", "inspect", "hf://org/name/x.gguf@bad\x01rev"), ""),
        (("models", "manifest", "org/name@v1", "--revision", "v2"), "two revisions"),
        (("models", "manifest", "org/name@..", "--revision", ".."), "is not a revision"),
        (("models", "manifest", "not a repo"), "neither a folder nor a Hub repo"),
    ],
)
def test_bad_references_are_usage_errors_with_no_request(
    tmp_path: Path, hub: HubServer, env: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    result = run(env, tmp_path, *args)
    assert result.returncode in (1, 2), result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert hub.log == []
    assert sorted(p.name for p in tmp_path.iterdir()) == []
