"""The deploy tests' fixtures (the lab of test hosts, its ssh environment), for other folders.

tests/deploy/conftest.py defines them; a folder that needs test hosts loads
that module once under a name of its own (with tests/deploy on the path for
its helper modules) and re-exports the fixtures it uses, instead of copying them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def load(name: str) -> ModuleType:
    """tests/deploy/conftest.py as the module ``name``."""
    if str(DEPLOY) not in sys.path:
        sys.path.insert(0, str(DEPLOY))
    spec = importlib.util.spec_from_file_location(name, DEPLOY / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
