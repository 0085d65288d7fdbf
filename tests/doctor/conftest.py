"""The deploy tests' lab (test hosts in network namespaces with their own sshd), reused.

tests/deploy/conftest.py defines ``lab`` and ``deploy_env``; they are loaded
from there (with tests/deploy on the path for its helper modules), not copied.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
if str(_DEPLOY) not in sys.path:
    sys.path.insert(0, str(_DEPLOY))
_spec = importlib.util.spec_from_file_location("deploy_lab_fixtures", _DEPLOY / "conftest.py")
assert _spec is not None and _spec.loader is not None
_lab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lab)

lab = _lab.lab
deploy_env = _lab.deploy_env
remote_command = _lab.remote_command
