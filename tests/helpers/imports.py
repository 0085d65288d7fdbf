"""What a real ``inferfleet`` run imports, seen from a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

# Runs `inferfleet ARGS` through the real main() in a fresh interpreter, then
# prints the names of every imported module as the last stdout line (the
# verb's own stdout goes to stderr).
PROBE = """
import contextlib, json, sys
from inferfleet.cli.app import main
sys.argv = ["inferfleet", *sys.argv[1:]]
with contextlib.redirect_stdout(sys.stderr):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def imported_by(*args: str, ok: bool = True) -> set[str]:
    """The modules ``inferfleet ARGS`` imported (``ok``: it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if ok:
        assert result["code"] in (0, None), done.stderr
    return set(result["modules"])


def under(modules: set[str], *prefixes: str) -> set[str]:
    """The modules that are, or are inside, one of ``prefixes``."""
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)}
