"""One wheel builds (``python -m build``) and installs as a tool (``uv tool install``).

The README installs from a checkout; people who only run inferfleet install it as a
tool, into a venv of its own. Here the wheel is built from this tree without
network (``--no-isolation``: the build backend is in the test venv) and installed
offline from the wheelhouse of its dependencies that ``scripts/test`` caches
(tests talk to no index), then the installed command runs a fleet file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from helpers import ROOT
from helpers.wheels import deps_wheelhouse

from inferfleet import __version__

BIN = Path(sys.executable).parent


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert done.returncode == 0, f"{argv[:4]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


def test_the_wheel_builds_and_installs_with_uv_tool_install(tmp_path: Path) -> None:
    wheelhouse = deps_wheelhouse()
    dist = tmp_path / "dist"
    run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(ROOT),
        ]
    )
    [wheel] = dist.glob("inferfleet-*.whl")
    assert wheel.name == f"inferfleet-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # What the CLI reads at run time ships inside the package; the tests do not.
    for data in (
        "inferfleet/examples/local/fleet.yaml",
        "inferfleet/examples/ci/inferfleet-check.yml",
        "inferfleet/lessons/lessons.yaml",
    ):
        assert data in names, data
    assert not any(n.startswith("tests/") for n in names)

    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_NO_CONFIG": "1",
    }
    run(
        [
            str(BIN / "uv"), "tool", "install", "--offline", "--no-index",
            "--find-links", str(wheelhouse), "--python", sys.executable, str(wheel),
        ],
        env,
    )  # fmt: skip
    tool = tmp_path / "bin" / "inferfleet"
    assert run([str(tool), "--version"], env).stdout.strip().endswith(__version__)
    # Its own venv, not this one: the tool runs from uv's tool directory.
    assert (tmp_path / "tools" / "inferfleet" / "bin" / "python").exists()
    example = tmp_path / "repo"
    run([str(tool), "init", str(example), "--no-ci"], env)
    shown = run([str(tool), "show", "gemma", "-f", str(example / "fleet.yaml")], env)
    assert "llama-server" in shown.stdout and "--ctx-size" in shown.stdout  # the exact argv
    assert run([str(tool), "validate", "-f", str(example / "fleet.yaml")], env).returncode == 0
