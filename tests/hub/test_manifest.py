"""``inferfleet models manifest`` against the test Hub (L-02, L-05, L-09)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hub_repos import (
    FRAGMENT_COUNT,
    MODEL_NAME,
    MODEL_SHA256,
    MODEL_SIZE,
    README,
    fragment_repo,
    small_repo,
    whole_repo,
)
from hubserver import HubServer

from inferfleet.artifacts.manifest import parse_manifest
from inferfleet.hub import wire
from inferfleet.io import http

Cli = Callable[..., Any]


def test_manifest_lists_sizes_hashes_and_kinds_sorted(
    hub: HubServer, cli: Cli, tmp_path: Path
) -> None:
    repo = hub.add(whole_repo())
    out = tmp_path / "m.manifest"
    result = cli("models", "manifest", repo.repo_id, "--endpoint", hub.endpoint, "--out", str(out))
    assert result.code == 0, result.stderr
    assert f"at {repo.repo_id}@{repo.commit}" in result.stdout
    lines = out.read_text().splitlines()
    assert lines[:4] == [
        "# inferfleet manifest v1",
        f"# repo: {repo.repo_id}",
        "# revision: main",
        f"# commit: {repo.commit}",
    ]
    config = repo.files["config.json"]
    assert lines[4:] == [
        f"{len(README)} gitsha1:{repo.files['README.md'].git_oid} README.md",
        f"{config.blob.size} gitsha1:{config.git_oid} config.json",
        f"{MODEL_SIZE} sha256:{MODEL_SHA256} {MODEL_NAME}",
    ]
    # The one parser (fleet files, `up`, `apply`, fetch) reads the same file set back.
    parsed = parse_manifest(out)
    assert (parsed.repo, parsed.revision, parsed.commit) == (repo.repo_id, "main", repo.commit)
    declared = {(f.path, f.size, f.kind, f.sha256) for f in parsed.entries}
    assert declared == {
        ("README.md", len(README), "gitsha1", None),
        ("config.json", config.blob.size, "gitsha1", None),
        (MODEL_NAME, MODEL_SIZE, "sha256", MODEL_SHA256),
    }


def test_non_lfs_size_is_the_files_not_the_redirect_page_L02(hub: HubServer) -> None:
    repo = hub.add(whole_repo())
    with http.client() as client:
        first = client.head(hub.resolve_url(repo.repo_id, "README.md"))
        remote = wire.probe(
            client, wire.HubFile(hub.endpoint, repo.repo_id, "main", "README.md", None)
        )
    # The 307's Content-Length is its ~250-byte page; the file is 59 bytes.
    assert first.status_code == 307 and "x-linked-size" not in first.headers
    assert int(first.headers["content-length"]) == 250 != len(README)
    assert remote.size == len(README) and remote.sha256 is None
    assert remote.gitsha1 == repo.files["README.md"].git_oid


def test_lfs_size_and_sha256_come_from_the_first_answer_not_the_cdn_L02(
    hub: HubServer,
) -> None:
    repo = hub.add(whole_repo())
    with http.client() as client:
        remote = wire.probe(
            client, wire.HubFile(hub.endpoint, repo.repo_id, "main", MODEL_NAME, None)
        )
        cdn = client.head(
            client.head(hub.resolve_url(repo.repo_id, MODEL_NAME)).headers["location"]
        )
    assert (remote.size, remote.sha256) == (MODEL_SIZE, MODEL_SHA256)
    # The CDN's ETag is a CAS hash, not the sha256: it was never asked by probe().
    assert wire.normalize_etag(cdn.headers["etag"]) != MODEL_SHA256
    assert len(hub.requests("cdn")) == 1


def test_revision_resolves_to_its_commit(hub: HubServer, cli: Cli) -> None:
    repo = whole_repo()
    repo.branches["dev"] = "d" * 40
    hub.add(repo)
    result = cli(
        "models", "manifest", repo.repo_id, "-r", "dev", "--endpoint", hub.endpoint, "--json"
    )
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "inferfleet.models.manifest/v1"
    assert (doc["revision"], doc["commit"]) == ("dev", "d" * 40)
    assert {f["path"] for f in doc["files"]} == set(repo.files)
    trees = hub.requests("hub", "/tree/")
    assert trees and all(f"/tree/{'d' * 40}" in t.path for t in trees)


def test_fragments_are_kept_by_a_gguf_glob_and_assembled_L05(
    hub: HubServer, cli: Cli, tmp_path: Path
) -> None:
    repo = hub.add(fragment_repo())
    out = tmp_path / "m.manifest"
    result = cli(
        "models", "manifest", repo.repo_id, "--include", "*.gguf",
        "--endpoint", hub.endpoint, "-o", str(out),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    entries = parse_manifest(out).entries
    fragments = [e for e in entries if ".part" in e.path]
    assert len(fragments) == FRAGMENT_COUNT and all(e.kind == "sha256" for e in fragments)
    assert [e for e in entries if e.kind == "parts"] == [
        type(entries[0])(MODEL_NAME, MODEL_SIZE, "parts", str(FRAGMENT_COUNT))
    ]
    assert "README.md" not in {e.path for e in entries}


def test_tree_pages_are_followed(hub: HubServer, cli: Cli) -> None:
    hub.page_size = 2
    repo = hub.add(small_repo(extra=3))
    result = cli("models", "manifest", repo.repo_id, "--endpoint", hub.endpoint, "--json")
    assert result.code == 0, result.stderr
    assert len(json.loads(result.stdout)["files"]) == len(repo.files) == 5
    assert len(hub.requests("hub", "/tree/")) == 3


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["-r", "nope"], 1, "revision not found"),
        (["--include", "*.safetensors"], 1, "no file matches --include *.safetensors"),
    ],
)
def test_bad_revision_or_glob_fails_and_leaves_the_old_manifest(
    hub: HubServer,
    cli: Cli,
    tmp_path: Path,
    args: list[str],
    code: int,
    message: str,
) -> None:
    repo = hub.add(small_repo())
    out = tmp_path / "m.manifest"
    out.write_text("old\n")
    result = cli(
        "models", "manifest", repo.repo_id, *args, "--endpoint", hub.endpoint, "-o", str(out)
    )
    assert result.code == code
    assert message in result.stderr and "Traceback" not in result.stderr
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_private_repo_without_token_says_how_to_authenticate_L07(hub: HubServer, cli: Cli) -> None:
    repo = hub.add(small_repo("test/private", private=True))
    result = cli("models", "manifest", repo.repo_id, "--endpoint", hub.endpoint)
    assert result.code == 1
    assert "authentication required (HTTP 401)" in result.stderr
    assert "HF_TOKEN" in result.stderr


def test_not_a_repo_id_is_a_usage_error(cli: Cli) -> None:
    result = cli("models", "manifest", "just-a-name", "--endpoint", "http://127.0.0.1:9")
    assert result.code == 2 and "OWNER/NAME" in result.stderr


def test_hf_endpoint_selects_a_mirror(
    hub: HubServer, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = hub.add(small_repo())
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    result = cli("models", "manifest", repo.repo_id)
    assert result.code == 0, result.stderr
    assert "model-small.gguf" in result.stdout
    assert httpx.URL(hub.endpoint).host == "127.0.0.1"


def test_an_endpoint_that_does_not_answer_is_a_clear_error(
    cli: Cli, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused connection is final after one try: no retry loop, no sleep."""
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)
    result = cli("models", "manifest", "org/name", "--endpoint", f"http://127.0.0.1:{port}")
    assert result.code == 1
    said = " ".join(result.stderr.split())
    assert "cannot be reached: connection refused" in said and "HF_ENDPOINT" in said
    assert slept == []
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
