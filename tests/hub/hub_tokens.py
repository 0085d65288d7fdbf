"""Names the hub tests share: the test Hub's tokens and the fleet maker's type.

Kept out of ``conftest.py``: ``from conftest import`` finds whichever
``conftest`` module was imported first under that name, so a run of
``tests/hub`` together with another folder failed at collection.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

GOOD_TOKEN = f"hf_good{secrets.token_hex(12)}"
SCOPED_TOKEN = f"hf_scoped{secrets.token_hex(12)}"  # may read test/other only

FleetMaker = Callable[..., Path]
