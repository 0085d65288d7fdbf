"""The deploy tests' lab and fixtures (test hosts in network namespaces with real sshd), reused.

tests/deploy/conftest.py defines ``lab``, ``deploy_env``, ``fake_runtime`` and
``tiny_model``; they are loaded from there (helpers/deploy_fixtures.py), not
copied, as tests/doctor does. ``real_parts`` (the pinned llama-server and the
model, built and verified once, cached) comes from tests/deploy/test_deploy_real.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import deploy_fixtures

_lab = deploy_fixtures.load("bootstrap_lab_fixtures")

lab = _lab.lab
deploy_env = _lab.deploy_env
fake_runtime = _lab.fake_runtime
tiny_model = _lab.tiny_model
_deploy_verbs = _lab._deploy_verbs

import test_deploy_real  # noqa: E402 - tests/deploy is on the path once the lab is loaded

real_parts = test_deploy_real.real_parts


@pytest.fixture(scope="session")
def wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache dir for the session: the wheel and wheelhouse are built once, then reused."""
    return tmp_path_factory.mktemp("bootstrap-cache")
