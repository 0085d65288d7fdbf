"""Documents of ``runtime install`` and ``runtimes``."""

from __future__ import annotations

from typing import (
    Literal,
)

from typing_extensions import TypedDict


class RuntimePatch(TypedDict):
    path: str  # in the fleet repository
    sha256: str  # of its bytes as applied


class RuntimeDocument(TypedDict):
    """``runtime install llama.cpp``: the installed build's record."""

    schema: Literal["inferfleet.runtime/v1"]
    runtime: str
    built: bool  # built by this call (False: it was cached)
    binary: str
    package: str
    version: str
    commit: str | None
    cmake_args: list[str]
    version_text: str
    built_at: float
    build_seconds: float
    patches: list[RuntimePatch]  # a git source's patches, in order (none for a package)


class VenvRuntimeDocument(TypedDict):
    """``runtime install vllm``: the pinned package's venv record."""

    schema: Literal["inferfleet.runtime-venv/v1"]
    runtime: str
    installed_now: bool  # installed by this call (False: it was cached)
    python: str
    package: str
    version: str
    removed: list[str]
    installed_at: float
    install_seconds: float


class RuntimeRow(TypedDict):
    runtime: str
    kind: str
    pin: str | None
    installed: bool
    binary: str | None
    version: str | None


class RuntimesDocument(TypedDict):
    schema: Literal["inferfleet.runtimes/v1"]
    runtimes: list[RuntimeRow]
