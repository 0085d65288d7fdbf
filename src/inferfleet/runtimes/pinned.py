"""Where a pinned llama.cpp build lives, as a pure function of its source (L-42).

The build itself (download, untar, cmake) is an effect and lives in
:mod:`inferfleet.install.llamacpp_build`; renderers only need the path, which
is the same on every host relative to that host's cache directory.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

from inferfleet.fleetfile.fleet import RuntimeSource

SERVER_BINARY = "llama-server"


def build_relpath(source: RuntimeSource) -> PurePosixPath:
    """The build's folder under a cache directory: one per pinned source and flag set."""
    key = f"{source.package}-{source.version}"
    if source.cmake_args:
        digest = hashlib.sha256("\0".join(source.cmake_args).encode()).hexdigest()[:12]
        key += f"-{digest}"
    return PurePosixPath("runtimes", "llama.cpp", key)


def server_relpath(source: RuntimeSource) -> PurePosixPath:
    """The server binary of that build, under a cache directory."""
    return build_relpath(source) / "bin" / SERVER_BINARY
