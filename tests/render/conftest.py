"""Fixtures for the renderer tests: the real validators.

promtool (Debian package ``prometheus``) and ``systemd-analyze`` are
required: a missing one fails the test with the install command. Quadlet's
generator (podman >= 4.4; Debian 12 ships 4.3) is looked up in
``$INFERFLEET_QUADLET``, ``/usr/libexec/podman/quadlet`` and
``/usr/local/lib/inferfleet/quadlet``; without it the dry-run tests skip and
say so. Debian 13's podman package carries it and it runs on Debian 12:
``apt-get download podman`` from a trixie sources list, then
``dpkg-deb -x podman_*.deb x && cp x/usr/libexec/podman/quadlet /usr/local/lib/inferfleet/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import quadlet_generator, require
from render_helpers import stub_executable


@pytest.fixture(scope="session")
def promtool() -> str:
    return require("promtool", "prometheus")


@pytest.fixture(scope="session")
def systemd_analyze() -> str:
    return require("systemd-analyze", "systemd")


@pytest.fixture(scope="session")
def quadlet() -> str:
    return quadlet_generator()


@pytest.fixture
def verify_root(tmp_path: Path) -> Callable[[list[str]], Path]:
    """A root for ``systemd-analyze --root``: the host's unit library plus stub binaries."""

    def make(binaries: list[str]) -> Path:
        root = tmp_path / "root"
        (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
        library = root / "usr/lib/systemd/system"
        if not library.exists():
            shutil.copytree("/usr/lib/systemd/system", library, symlinks=True)
        for binary in binaries:
            stub_executable(root, binary)
        return root

    return make
