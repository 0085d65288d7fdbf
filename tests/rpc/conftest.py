"""The deploy tests' lab and fixtures (test hosts in network namespaces with real sshd), reused.

tests/deploy/conftest.py defines ``lab``, ``deploy_env``, ``fake_runtime``,
``tiny_model`` and ``fleet``; they are loaded from there
(helpers/deploy_fixtures.py), not copied, as tests/bootstrap does.
``real_parts`` (the pinned llama.cpp build and the model, built and verified
once, cached) comes from tests/deploy/test_deploy_real.py.
"""

from __future__ import annotations

from helpers import deploy_fixtures

_lab = deploy_fixtures.load("rpc_lab_fixtures")

lab = _lab.lab
deploy_env = _lab.deploy_env
fake_runtime = _lab.fake_runtime
tiny_model = _lab.tiny_model
fleet = _lab.fleet
_deploy_verbs = _lab._deploy_verbs

import test_deploy_real  # noqa: E402 - tests/deploy is on the path once the lab is loaded

real_parts = test_deploy_real.real_parts
