"""``inferfleet models fetch`` and ``verify`` on the real model (L-01, L-04, L-05, L-08, L-09)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from gguf_splitter import read_split_keys
from hub_repos import (
    MODEL_NAME,
    MODEL_SHA256,
    MODEL_SIZE,
    blobs,
    fragment_repo,
    small_repo,
    split_repo,
    whole_repo,
)
from hub_tokens import FleetMaker
from hubserver import Blob, HubServer, Repo

from inferfleet.artifacts.locate import main_file
from inferfleet.artifacts.manifest import declared_files
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io.locks import FileLock

Cli = Callable[..., Any]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def prepare(hub: HubServer, repo: Repo, make_fleet: FleetMaker, cli: Cli, *globs: str) -> Path:
    """Add the repo, write its manifest next to a new fleet.yaml; returns the fleet file."""
    hub.add(repo)
    fleet = make_fleet(repo.repo_id)
    includes = [arg for glob in globs for arg in ("--include", glob)]
    result = cli(
        "models", "manifest", repo.repo_id, *includes,
        "--endpoint", hub.endpoint, "-o", str(fleet.parent / "m.manifest"),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    return fleet


def fetch(cli: Cli, hub: HubServer, fleet: Path, *extra: str) -> Any:
    return cli("models", "fetch", "m", "-f", str(fleet), "--endpoint", hub.endpoint, *extra)


def test_fetch_whole_model_then_nothing_twice(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    fleet = prepare(hub, whole_repo(), make_fleet, cli)
    result = fetch(cli, hub, fleet)
    assert result.code == 0, result.stderr
    folder = fleet.parent / "models" / "m"
    assert sha256_of(folder / MODEL_NAME) == MODEL_SHA256
    assert "verified: 3 file(s) ok" in result.stdout
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "README.md",
        "config.json",
        MODEL_NAME,
    ]
    sent = dict(hub.sent)
    assert sent[MODEL_NAME] == MODEL_SIZE  # one pass over the bytes
    again = fetch(cli, hub, fleet, "--json")
    assert again.code == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["schema"] == "inferfleet.models.fetch/v1" and doc["ok"]
    assert {f["status"] for f in doc["files"]} == {"present"} and doc["fetched_bytes"] == 0
    assert hub.sent == sent  # never a byte twice


def test_verify_stats_then_hashes_and_full_rehashes(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    fleet = prepare(hub, whole_repo(), make_fleet, cli)
    assert fetch(cli, hub, fleet).code == 0
    verify = cli("models", "verify", "m", "-f", str(fleet), "--json")
    assert verify.code == 0, verify.stderr
    doc = json.loads(verify.stdout)
    assert doc["schema"] == "inferfleet.models.verify/v1" and doc["ok"]
    # fetch recorded what it verified: nothing is read again.
    assert {f["method"] for f in doc["files"]} == {"record"}
    # Flip one byte, keep size, mtime and inode: only --full can notice.
    model = fleet.parent / "models" / "m" / MODEL_NAME
    st = model.stat()
    with model.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 1]))
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cli("models", "verify", "m", "-f", str(fleet)).code == 0
    full = cli("models", "verify", "m", "-f", str(fleet), "--full")
    assert full.code == 1
    assert "wrong-hash" in full.stdout and "failed verification" in full.stderr
    # The record forgot the file: a plain verify now hashes it and fails too.
    assert cli("models", "verify", "m", "-f", str(fleet)).code == 1


def test_verify_checks_sizes_by_stat_without_reading_L08(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    fleet = prepare(hub, small_repo(), make_fleet, cli)
    folder = fleet.parent / "models" / "m"
    folder.mkdir(parents=True)
    (folder / "README.md").write_bytes(b"x")
    # A 1 TiB sparse file: reading it to count bytes would take many minutes.
    with (folder / "model-small.gguf").open("wb") as handle:
        handle.truncate(1 << 40)
    began = time.monotonic()
    result = cli("models", "verify", "m", "-f", str(fleet), "--json")
    elapsed = time.monotonic() - began
    assert result.code == 1
    files = {f["path"]: f for f in json.loads(result.stdout)["files"]}
    assert files["model-small.gguf"]["status"] == "wrong-size"
    assert f"{1 << 40:,} bytes on disk" in files["model-small.gguf"]["detail"]
    assert files["README.md"]["status"] == "wrong-size"
    assert elapsed < 10  # generous: stat only; reading 1 TiB would not finish


def test_split_gguf_parts_stay_parts_L04(hub: HubServer, cli: Cli, make_fleet: FleetMaker) -> None:
    repo = split_repo()
    fleet = prepare(hub, repo, make_fleet, cli)
    result = fetch(cli, hub, fleet, "--jobs", "3")
    assert result.code == 0, result.stderr
    folder = fleet.parent / "models" / "m"
    parts = sorted(p.name for p in folder.glob("*.gguf"))
    assert parts == sorted(name for name, _ in blobs().split)  # nothing concatenated
    for name, blob in blobs().split:
        assert sha256_of(folder / name) == blob.sha256
    keys = read_split_keys((folder / parts[0]).read_bytes()[: 8 << 20])
    assert keys == {"split.no": 0, "split.count": 3, "split.tensors.count": 236}
    loaded = load_fleet(fleet)
    model = loaded.fleet.models["m"]
    main = main_file(model, declared_files(model, loaded.root))
    assert main is not None and main == parts[0] and main.endswith("-00001-of-00003.gguf")


def test_fragments_verified_then_concatenated_in_numeric_order_L05(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    fleet = prepare(hub, fragment_repo(), make_fleet, cli, "*.gguf")
    result = fetch(cli, hub, fleet, "--json")
    assert result.code == 0, result.stderr
    statuses = {f["path"]: f["status"] for f in json.loads(result.stdout)["files"]}
    assert statuses[MODEL_NAME] == "assembled"
    folder = fleet.parent / "models" / "m"
    # part10of11 sorts before part2of11: only numeric order gives the real model.
    assert sha256_of(folder / MODEL_NAME) == MODEL_SHA256
    verify = cli("models", "verify", "m", "-f", str(fleet), "--full", "--json")
    assert verify.code == 0, verify.stderr
    methods = {f["path"]: f["method"] for f in json.loads(verify.stdout)["files"]}
    assert methods[MODEL_NAME] == "sha256"  # checked against the hash taken at assembly


def test_a_wrong_whole_file_hash_keeps_the_fragments_and_no_whole_file_L05(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    fleet = prepare(hub, fragment_repo(), make_fleet, cli)
    manifest = fleet.parent / "m.manifest"
    text = manifest.read_text().replace(f"parts:11 {MODEL_NAME}", f"sha256:{'0' * 64} {MODEL_NAME}")
    manifest.write_text(text)
    result = fetch(cli, hub, fleet)
    assert result.code == 1
    assert "concatenated fragments have sha256" in result.stderr
    folder = fleet.parent / "models" / "m"
    assert not (folder / MODEL_NAME).exists()
    assert not list(folder.glob(f".{MODEL_NAME}.*.tmp"))  # no temp of the whole file left
    assert len(list(folder.glob("*.part*of11"))) == 11


def test_only_declared_files_and_a_vanished_one_is_reported_L09(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = whole_repo()
    fleet = prepare(hub, repo, make_fleet, cli)
    # Upstream moves on: a file disappears and a new variant appears.
    del repo.files["config.json"]
    repo.files["new-variant.gguf"] = type(repo.files[MODEL_NAME])(
        "new-variant.gguf", Blob([b"new bytes"]).hashed(), lfs=True
    )
    result = fetch(cli, hub, fleet)
    assert result.code == 1
    assert "config.json is not in the repo at this revision (HTTP 404)" in result.stderr
    assert "Traceback" not in result.stderr
    folder = fleet.parent / "models" / "m"
    assert sha256_of(folder / MODEL_NAME) == MODEL_SHA256  # the rest completed
    assert not hub.requests(path_part="new-variant")
    verify = cli("models", "verify", "m", "-f", str(fleet), "--json")
    statuses = {f["path"]: f["status"] for f in json.loads(verify.stdout)["files"]}
    assert statuses == {"README.md": "ok", MODEL_NAME: "ok", "config.json": "missing"}


def test_inline_files_resolve_the_branch_to_one_commit_via_hf_endpoint(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = hub.add(small_repo())
    blob = repo.files["model-small.gguf"].blob
    fleet = make_fleet(
        repo.repo_id, files=[{"path": "model-small.gguf", "size": blob.size, "sha256": blob.sha256}]
    )
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)  # a mirror, no --endpoint
    result = cli("models", "fetch", "m", "-f", str(fleet))
    assert result.code == 0, result.stderr
    resolves = hub.requests("hub", "/resolve/")
    assert resolves and all(f"/resolve/{repo.commit}/" in r.path for r in resolves)


def test_free_space_is_checked_before_any_request(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = hub.add(small_repo())
    fleet = make_fleet(repo.repo_id)
    huge = 1 << 60
    (fleet.parent / "m.manifest").write_text(
        f"# commit: {repo.commit}\n{huge} sha256:{'1' * 64} model-small.gguf\n"
    )
    result = fetch(cli, hub, fleet)
    assert result.code == 1
    assert "left to fetch" in result.stderr and "nothing was downloaded" in result.stderr
    assert not hub.requests("hub", "/resolve/")


def test_upstream_that_changed_under_the_manifest_is_refused(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    repo = small_repo()
    fleet = prepare(hub, repo, make_fleet, cli)
    item = repo.files["model-small.gguf"]
    item.blob = Blob([(blobs().model, 1 << 20, item.blob.size)]).hashed()
    result = fetch(cli, hub, fleet)
    assert result.code == 1
    assert "upstream now serves" in result.stderr and "regenerate" in result.stderr
    assert not hub.requests("cdn")
    assert not (fleet.parent / "models" / "m" / "model-small.gguf").exists()


def test_a_second_fetch_into_the_same_dir_is_refused(
    hub: HubServer, cli: Cli, make_fleet: FleetMaker
) -> None:
    fleet = prepare(hub, small_repo(), make_fleet, cli)
    folder = fleet.parent / "models" / "m"
    folder.mkdir(parents=True)
    with FileLock(folder / ".inferfleet-fetch.lock", str(folder)) as held:
        held.acquire("a fetch started by the test")
        result = fetch(cli, hub, fleet)
    assert result.code == 1, result.stderr
    assert f"model dir {folder} is locked by a fetch started by the test" in result.stderr
    assert f"pid {os.getpid()}" in result.stderr
    assert not [r for r in hub.requests("hub", "/resolve/") if r.method == "GET"]


def test_fetch_refuses_a_model_that_is_not_from_the_hub(cli: Cli, tmp_path: Path) -> None:
    from inferfleet.cli.fleet_cmds import embedded_example

    # The embedded example's model comes from a package (only up/show fall back to it).
    example = str(embedded_example())
    result = cli(
        "models", "fetch", "gemma3-270m", "-f", example, "--endpoint", "http://127.0.0.1:9"
    )
    assert result.code == 2 and "does not come from the Hub" in result.stderr


def test_there_is_no_option_that_takes_the_token_L06(cli: Cli) -> None:
    result = cli("models", "fetch", "m", "--token", "hf_abc")
    assert result.code == 2 and "No such option" in result.stderr


@pytest.mark.parametrize("verb", ["fetch", "verify"])
def test_unknown_model_name(cli: Cli, make_fleet: FleetMaker, verb: str) -> None:
    fleet = make_fleet("test/x")
    (fleet.parent / "m.manifest").write_text(f"1 sha256:{'1' * 64} a.gguf\n")
    result = cli("models", verb, "nope", "-f", str(fleet))
    assert result.code == 2 and "no model named 'nope'" in result.stderr
    assert "known models: m" in result.stderr


@pytest.mark.e2e
@pytest.mark.slow
def test_fetched_split_loads_in_the_real_llama_server_from_part_1_L04(
    hub: HubServer,
    cli: Cli,
    make_fleet: FleetMaker,
    port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    llama_server_binary: Path,
) -> None:
    from inferfleet.cli.fleet_cmds import embedded_example
    from inferfleet.install import llamacpp_build
    from inferfleet.io.process import spawn_detached, terminate

    source = load_fleet(embedded_example()).fleet.runtimes["llama-cpp"].source
    assert source is not None
    monkeypatch.delenv("INFERFLEET_CACHE_DIR")  # the shared build cache (tests/conftest.py)
    runtime = llamacpp_build.installed(source)
    assert runtime is not None, "the llama_server_binary fixture builds it"
    fleet = prepare(hub, split_repo(), make_fleet, cli)
    assert fetch(cli, hub, fleet, "--jobs", "3").code == 0
    part1 = next((fleet.parent / "models" / "m").glob("*-00001-of-00003.gguf"))
    server = spawn_detached(
        [runtime.binary, "-m", str(part1), "--host", "127.0.0.1", "--port", str(port), "-c", "512"],
        log_path=tmp_path / "server.log",
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        answer = httpx.post(
            f"http://127.0.0.1:{port}/completion",
            json={"prompt": "The capital of France is", "n_predict": 4},
            timeout=30,
        ).json()
        assert answer["tokens_predicted"] == 4, (tmp_path / "server.log").read_text()[-2000:]
    finally:
        terminate(server)
