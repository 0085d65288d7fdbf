"""`inferfleet add REPO:TAG --host HOST` against the test Hub: a multi-file quant in one step.

Run as a user runs it (a subprocess: huggingface_hub reads HF_* at import).
"""

from __future__ import annotations

from pathlib import Path

from hf_env import hf_environment, run
from hub_repos import split_repo
from hubserver import HubServer

from inferfleet.fleetfile.loader import load_fleet

FLEET = """\
# my fleet: this comment stays
version: 1
hosts:
  box:
    address: localhost
runtimes:
  llama-cpp:
    kind: llama.cpp
    binary: /opt/llama/llama-server   # pinned by hand
services:
  old:
    host: box
    runtime: llama-cpp
    model: local-model
    port: 8080
    ctx_per_slot: 4096
models:
  local-model:
    source: {path: /srv/models}
    files: [{path: a.gguf, size: 10}]
"""


def test_add_a_multi_file_quant(hub: HubServer, tmp_path: Path) -> None:
    repo = hub.add(split_repo())
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    env = hf_environment(tmp_path, hub)
    args = ("add", "test/gemma-split:q4_k_m", "--host", "box", "--ctx", "4096", "--parallel", "2")
    dry = run(env, tmp_path, *args, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "+  gemma-split-q4_k_m:" in dry.stdout and fleet.read_text() == FLEET
    done = run(env, tmp_path, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    text = fleet.read_text()
    assert "# my fleet: this comment stays" in text and "# pinned by hand" in text
    loaded = load_fleet(fleet).fleet
    service = loaded.services["gemma-split-q4_k_m"]
    assert (service.port, service.ctx_per_slot, service.parallel) == (8081, 4096, 2)
    assert service.runtime == "llama-cpp"
    model = loaded.models[service.model or ""]
    assert model.source.revision == repo.commit  # type: ignore[union-attr]
    parts = sorted(p for p in repo.files if p.endswith(".gguf"))
    assert [f.path for f in model.files] == parts
    assert all(f.sha256 for f in model.files)
    # The same name again: refused, the file untouched.
    again = run(env, tmp_path, *args)
    assert again.returncode == 2 and "already in the fleet file" in again.stderr
    assert fleet.read_text() == text


def test_add_of_a_repo_without_that_quant(hub: HubServer, tmp_path: Path) -> None:
    hub.add(split_repo())
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    done = run(
        hf_environment(tmp_path, hub), tmp_path,
        "add", "test/gemma-split:Q8_0", "--host", "box", "--ctx", "4096",
    )  # fmt: skip
    assert done.returncode == 2
    assert "test/gemma-split:Q8_0" in done.stderr and "no file matches" in done.stderr
    assert fleet.read_text() == FLEET


def test_add_fit_sizes_the_window_for_the_host(hub: HubServer, tmp_path: Path) -> None:
    hub.add(split_repo())
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        FLEET.replace(
            "    address: localhost\n",
            "    address: localhost\n    devices:\n"
            "      - {name: cpu0, vendor: cpu, memory: 3GiB}\n",
        )
    )
    env = hf_environment(tmp_path, hub)
    done = run(env, tmp_path, "add", "test/gemma-split:q4_k_m", "--host", "box", "--fit")
    assert done.returncode == 0, done.stdout + done.stderr
    service = load_fleet(fleet).fleet.services["gemma-split-q4_k_m"]
    assert service.devices == ["cpu0"]
    assert service.ctx_per_slot is not None and service.ctx_per_slot % 4096 == 0
    assert f"--fit: {service.ctx_per_slot} tokens per slot x 1 fit the devices of box" in (
        " ".join(done.stdout.split())
    )
    # The budget agrees: it fits there, and one step more would not (or the model's own limit).
    budget = run(env, tmp_path, "budget", "gemma-split-q4_k_m", "--solve", "--json")
    assert budget.returncode == 0, budget.stdout + budget.stderr
    assert f'"ctx_per_slot": {service.ctx_per_slot}' in budget.stdout


def test_add_needs_a_window(hub: HubServer, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    done = run(hf_environment(tmp_path, hub), tmp_path, "add", "test/x:Q4_K_M", "--host", "box")
    assert done.returncode == 2 and "--ctx N, or --fit" in done.stderr
    assert fleet.read_text() == FLEET
