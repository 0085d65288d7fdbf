"""The ``inferfleet`` entry point with the deploy verbs, for test hosts and subprocesses.

The test hosts run this (with the same interpreter) as their ``inferfleet``:
it makes sure plan/deploy/apply/rollback are among the app's verbs (a no-op
once app.py lists them), then runs the real ``main``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This checkout's inferfleet, whatever the interpreter has installed (a venv made
# from another checkout): ssh sessions on the test hosts do not carry PYTHONPATH.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from inferfleet.cli import app as app_module  # noqa: E402

DEPLOY_VERBS = ("plan", "deploy", "apply", "rollback")


def ensure_registered() -> None:
    for verb in DEPLOY_VERBS:
        app_module.VERBS.setdefault(verb, ("deploy_cmd", "register"))


if __name__ == "__main__":
    ensure_registered()
    app_module.main()
