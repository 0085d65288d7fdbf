"""The deploy tests' lab (test hosts in network namespaces with their own sshd), reused for
`import host` (loaded from tests/deploy/conftest.py, not copied)."""

from __future__ import annotations

from helpers import deploy_fixtures

_lab = deploy_fixtures.load("deploy_lab_fixtures")

lab = _lab.lab
deploy_env = _lab.deploy_env
