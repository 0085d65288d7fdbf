"""L-42 on the host: a ``binary:`` runtime starts only as the binary its fleet file pinned.

``apply`` on this machine with a stand-in llama-server (the fake server
behind a wrapper that answers ``--version`` like llama-server and counts how
often it was asked); the state dir is the test's own. A wrong sha256 or a
wrong version refuses the service before anything starts; the right pins
start it; the digest is cached by the file's identity and a tampered or
stale cache is not trusted; ``runtime pin`` prints pins that make a fleet
pass ``check`` and deploy.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from deploy_repo import FleetRepo, local_fleet, stop_recorded

from inferfleet.artifacts import digests
from inferfleet.deploy import pins

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
VERSION = "4242 (b4242)"


def wrapper_text(version: str, calls: Path) -> str:
    return (
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then\n'
        f"  echo x >> {calls}\n"
        f"  echo 'version: {version}' >&2\n"
        "  echo 'built with cc for x86_64' >&2\n"
        "  exit 0\n"
        "fi\n"
        f'exec {sys.executable} {HERE / "fake_llama_server.py"} "$@"\n'
    )


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    folder = tmp_path / "runtime" / "bin"
    folder.mkdir(parents=True)
    path = folder / "llama-server"
    path.write_text(wrapper_text(VERSION, tmp_path / "version-calls"))
    path.chmod(0o755)
    return path


def version_calls(tmp_path: Path) -> int:
    calls = tmp_path / "version-calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pinned_repo(
    tmp_path: Path, port: int, binary: Path, tiny_model: dict[str, Any], _isolated_state: Path
) -> Iterator[FleetRepo]:
    runtime = {
        "kind": "llama.cpp", "binary": str(binary), "version": VERSION,
        "sha256": sha256_of(binary),
    }  # fmt: skip
    data = local_fleet(runtime, tiny_model, port)
    repo = FleetRepo.create(tmp_path / "fleet", data, hosts=[])
    repo.states = {"here": _isolated_state}
    yield repo
    stop_recorded(_isolated_state)


def apply(cli: Any, repo: FleetRepo, *args: str) -> Any:
    return cli("apply", "--file", str(repo.fleet_file), *args)


def nothing_started(repo: FleetRepo, port: int) -> None:
    assert repo.record("here", "a") is None and repo.marker("here", "a") is None
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0)


def cache_file(state: Path, binary: Path) -> Path:
    return pins.DigestCache(state).path(binary.resolve())


@pytest.fixture
def hash_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file the pin gate hashes (the one streaming hasher, counted)."""
    seen: list[Path] = []
    real = digests.file_digests

    def counting(path: Path, **kwargs: Any) -> digests.Digests:
        seen.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(pins, "file_digests", counting)
    return seen


def test_a_binary_with_another_sha256_is_refused_and_never_run(
    cli, pinned_repo: FleetRepo, binary: Path, tmp_path: Path, port: int
) -> None:
    """L-42: a fork's build at the pinned path does not start, and is not even executed."""
    found = sha256_of(binary)
    pinned_repo.data["runtimes"]["fake"]["sha256"] = "0" * 64
    pinned_repo.commit("pin another build")
    result = apply(cli, pinned_repo)
    assert result.code == 1
    err = " ".join(result.stderr.split())
    assert "runtime 'fake':" in err and str(binary) in err
    assert f"its sha256 is {found}, the fleet file pins {'0' * 64} (L-42)" in err
    assert "runtimes.fake.sha256" in err
    assert "inferfleet runtime pin fake" in err and "Nothing was stopped" in err
    assert "Traceback" not in result.stderr
    nothing_started(pinned_repo, port)
    assert version_calls(tmp_path) == 0  # an unverified binary is never executed


def test_a_binary_reporting_another_version_is_refused(
    cli, pinned_repo: FleetRepo, tmp_path: Path, port: int
) -> None:
    pinned_repo.data["runtimes"]["fake"]["version"] = "4589 (a1b2c3d)"
    pinned_repo.commit("pin another version")
    result = apply(cli, pinned_repo, "--json")
    assert result.code == 1
    failed = json.loads(result.stdout)["failed"]
    assert failed["service"] == "a" and failed["error"] == "GateError"
    assert failed["message"] == (
        f"runtime 'fake': {pinned_repo.data['runtimes']['fake']['binary']} reports version "
        f"'{VERSION}', the fleet file pins '4589 (a1b2c3d)' (L-42)"
    )
    assert failed["where"] == "service a: runtimes.fake.version"
    assert "inferfleet runtime pin fake" in failed["hint"]
    nothing_started(pinned_repo, port)
    assert version_calls(tmp_path) == 1


def test_the_pinned_binary_starts_and_its_digest_is_cached(
    cli,
    pinned_repo: FleetRepo,
    binary: Path,
    tmp_path: Path,
    port: int,
    _isolated_state: Path,
    hash_calls: list[Path],
) -> None:
    result = apply(cli, pinned_repo, "--json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(d["service"], d["outcome"]) for d in doc["done"]] == [("a", "deployed")]
    gate = [a for a in doc["actions"] if a["kind"] == "gate" and "L-42" in a["detail"]]
    assert gate and f"reports version '{VERSION}'" in gate[0]["detail"]
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    assert hash_calls == [binary.resolve()] and version_calls(tmp_path) == 1
    cache = cache_file(_isolated_state, binary)
    entry = json.loads(cache.read_text())
    assert entry["sha256"] == sha256_of(binary) and entry["version"] == VERSION
    assert cache.stat().st_mode & 0o777 == 0o600
    written = cache.stat().st_mtime_ns

    # Asked for again (kept, the gates run): neither hashed nor asked for its version.
    again = json.loads(apply(cli, pinned_repo, "--service", "a", "--json").stdout)
    assert [(d["service"], d["outcome"]) for d in again["done"]] == [("a", "kept")]
    assert hash_calls == [binary.resolve()] and version_calls(tmp_path) == 1
    assert cache.stat().st_mtime_ns == written


@pytest.mark.parametrize(
    "tamper",
    [
        "not json",
        "[]",
        '{"sha256": "x"}',
        "sha256 of other bytes, for another inode",
    ],
)
def test_a_damaged_or_stale_cache_is_not_trusted(
    cli,
    pinned_repo: FleetRepo,
    binary: Path,
    port: int,
    _isolated_state: Path,
    hash_calls: list[Path],
    tamper: str,
) -> None:
    assert apply(cli, pinned_repo).code == 0
    cache = cache_file(_isolated_state, binary)
    entry = json.loads(cache.read_text())
    if tamper.startswith("sha256 of other"):
        entry["identity"]["inode"] += 1
        entry["sha256"] = "f" * 64
        cache.write_text(json.dumps(entry))
    else:
        cache.write_text(tamper)
    result = apply(cli, pinned_repo, "--service", "a")
    assert result.code == 0, result.stderr
    assert len(hash_calls) == 2  # hashed again, not believed
    rewritten = json.loads(cache.read_text())
    assert rewritten["sha256"] == sha256_of(binary)
    assert rewritten["identity"]["inode"] == binary.stat().st_ino


def test_a_fork_copied_over_the_pinned_binary_with_its_mtime_set_back_is_caught(
    cli, pinned_repo: FleetRepo, binary: Path, tmp_path: Path, port: int, _isolated_state: Path
) -> None:
    """Same path, size and mtime (and inode: rewritten in place): the ctime gives it away."""
    assert apply(cli, pinned_repo).code == 0
    pid = pinned_repo.record("here", "a")["pid"]  # type: ignore[index]
    before = binary.stat()
    fork = wrapper_text(VERSION.replace("4242", "4243"), tmp_path / "version-calls")
    assert len(fork) == before.st_size
    with binary.open("r+") as handle:  # in place: the inode stays
        handle.write(fork)
    os.utime(binary, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = binary.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    result = apply(cli, pinned_repo, "--service", "a")
    assert result.code == 1
    assert f"its sha256 is {sha256_of(binary)}" in " ".join(result.stderr.split())
    # The running service was left alone.
    assert pinned_repo.record("here", "a")["pid"] == pid  # type: ignore[index]
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200


def test_runtime_pin_output_round_trips_into_a_fleet_that_passes(
    cli, pinned_repo: FleetRepo, binary: Path, port: int
) -> None:
    runtime = pinned_repo.data["runtimes"]["fake"]
    del runtime["version"], runtime["sha256"]
    pinned_repo.commit("an unpinned binary runtime (the L-42 incident)")
    incident = cli("check", str(pinned_repo.fleet_file), "--json")
    assert incident.code != 0
    hits = [f for f in json.loads(incident.stdout)["findings"] if f["rule"] == "binary-not-pinned"]
    assert len(hits) == 1 and hits[0]["severity"] == "error" and hits[0]["lesson"] == "L-42"
    assert "inferfleet runtime pin fake" in hits[0]["hint"]

    printed = cli("runtime", "pin", "fake", "--file", str(pinned_repo.fleet_file))
    assert printed.code == 0, printed.stderr
    snippet = yaml.safe_load(printed.stdout)
    assert snippet == {
        "runtimes": {
            "fake": {
                "kind": "llama.cpp",
                "binary": str(binary),
                "version": VERSION,
                "sha256": sha256_of(binary),
            }
        }
    }
    pinned_repo.data["runtimes"].update(snippet["runtimes"])
    pinned_repo.commit("pin the runtime")
    fixed = cli("check", str(pinned_repo.fleet_file), "--json")
    rules = [f["rule"] for f in json.loads(fixed.stdout)["findings"]]
    assert "binary-not-pinned" not in rules
    assert apply(cli, pinned_repo).code == 0
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200


def test_runtime_pin_refuses_what_it_cannot_pin(
    cli, pinned_repo: FleetRepo, binary: Path, tmp_path: Path
) -> None:
    unknown = cli("runtime", "pin", "nope", "--file", str(pinned_repo.fleet_file))
    assert unknown.code == 2 and "no runtime named 'nope'" in unknown.stderr
    assert "binary runtimes there: fake" in unknown.stderr
    binary.unlink()
    missing = cli("runtime", "pin", "fake", "--file", str(pinned_repo.fleet_file))
    assert missing.code == 2 and "is not an executable file on this machine" in missing.stderr
    mute = tmp_path / "mute"
    mute.write_text("#!/bin/sh\necho hello\n")
    mute.chmod(0o755)
    pinned_repo.data["runtimes"]["fake"]["binary"] = str(mute)
    pinned_repo.commit("a binary that is no llama-server")
    silent = cli("runtime", "pin", "fake", "--file", str(pinned_repo.fleet_file))
    assert silent.code != 0 and "reported no llama.cpp version" in silent.stderr
    assert "last line: hello" in silent.stderr and "Traceback" not in silent.stderr
