"""The deploy tests' lab (test hosts in network namespaces with their own sshd), reused.

tests/deploy/conftest.py defines ``lab`` and ``deploy_env``; they are loaded
from there (helpers/deploy_fixtures.py), not copied.
"""

from __future__ import annotations

from helpers import deploy_fixtures

_lab = deploy_fixtures.load("deploy_lab_fixtures")

lab = _lab.lab
deploy_env = _lab.deploy_env
remote_command = _lab.remote_command
