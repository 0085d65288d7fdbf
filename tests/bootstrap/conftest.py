"""The deploy tests' lab and fixtures (test hosts in network namespaces with real sshd), reused.

tests/deploy/conftest.py defines ``lab``, ``deploy_env``, ``fake_runtime`` and
``tiny_model``; they are loaded from there (with tests/deploy on the path for
its helper modules), not copied, as tests/doctor does.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
if str(_DEPLOY) not in sys.path:
    sys.path.insert(0, str(_DEPLOY))
_spec = importlib.util.spec_from_file_location("bootstrap_lab_fixtures", _DEPLOY / "conftest.py")
assert _spec is not None and _spec.loader is not None
_lab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lab)

lab = _lab.lab
deploy_env = _lab.deploy_env
fake_runtime = _lab.fake_runtime
tiny_model = _lab.tiny_model
_deploy_verbs = _lab._deploy_verbs


@pytest.fixture(scope="session")
def wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache dir for the session: the wheel and wheelhouse are built once, then reused."""
    return tmp_path_factory.mktemp("bootstrap-cache")
