"""The skip gate (tests/helpers/skip_gate.py) fails a run that skipped by accident.

Each case runs a real pytest in a subprocess on a tiny test folder with the gate loaded
as a plugin, and reads its exit code and summary. Removing the gate's exit-status change
(``session.exitstatus = ...``) makes ``test_an_accidental_skip_fails_the_run`` fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def run_pytest(folder: Path, body: str, *args: str, as_user: bool = False) -> tuple[int, str]:
    (folder / "test_case.py").write_text(body)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "helpers.skip_gate",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    if as_user:
        # The gate asks os.geteuid(); a user run is shown by faking it in the child only.
        (folder / "conftest.py").write_text("import os\nos.geteuid = lambda: 1000\n")
    done = subprocess.run(
        [*argv, *args, str(folder)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def test_an_accidental_skip_fails_the_run(tmp_path: Path) -> None:
    code, out = run_pytest(
        tmp_path,
        "import pytest\n\ndef test_a():\n    pytest.skip('model not assembled')\n\n"
        "def test_b():\n    assert True\n",
    )
    assert code == 1, out
    assert "1 skipped" in out and "[NOT ALLOWED] model not assembled" in out
    assert "test_case.py::test_a: model not assembled" in out


def test_a_root_skip_is_allowed_only_when_not_root(tmp_path: Path) -> None:
    body = "import pytest\n\ndef test_a():\n    pytest.skip('needs root: makes namespaces')\n"
    code, out = run_pytest(tmp_path, body, as_user=True)
    assert code == 0, out
    assert "[allowed] needs root: makes namespaces" in out
    if os.geteuid() == 0:  # CI: as root the same skip fails the run
        (tmp_path / "conftest.py").unlink()
        code, out = run_pytest(tmp_path, body)
        assert code == 1, out
        assert "[NOT ALLOWED] needs root: makes namespaces" in out


def test_a_clean_run_prints_zero_and_passes(tmp_path: Path) -> None:
    code, out = run_pytest(tmp_path, "def test_a():\n    assert True\n")
    assert code == 0, out
    assert "0 skipped" in out


def test_a_failing_run_keeps_its_own_exit_code(tmp_path: Path) -> None:
    code, out = run_pytest(tmp_path, "def test_a():\n    assert False\n", "--tb=no")
    assert code == 1, out


@pytest.mark.parametrize("where", ["module", "decorator"])
def test_collection_and_mark_skips_count_too(tmp_path: Path, where: str) -> None:
    body = {
        "module": "import pytest\npytest.skip('no tool', allow_module_level=True)\n",
        "decorator": "import pytest\n\n@pytest.mark.skipif(True, reason='no tool')\n"
        "def test_a():\n    pass\n",
    }[where]
    code, out = run_pytest(tmp_path, body)
    assert code == 1, out
    assert "[NOT ALLOWED] no tool" in out
