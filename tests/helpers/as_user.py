"""Run a function as another (non-root) user: a forked copy of this root test process.

Forked, not exec'd: this interpreter may live where the test user cannot read
(a root-only pyenv), so the child uses the code already imported here and
must not import more than the standard library has loaded. The child becomes
the user for good (groups, gid, uid), runs ``job`` and sends its JSON-able
result back through a pipe; an exception in it fails the test with its text.
"""

from __future__ import annotations

import _strptime  # noqa: F401  (datetime.strptime imports it lazily: the child could not)
import json
import os
import pwd
import subprocess
import traceback
from collections.abc import Callable
from typing import Any


def ensure_user(name: str) -> None:
    """A system user with no home (created once; left for the next run)."""
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)


def run_as(user: str, job: Callable[[], Any], *, env: dict[str, str]) -> Any:
    """``job()`` as ``user`` with ``env`` added to the environment; its result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            info = pwd.getpwnam(user)
            os.initgroups(user, info.pw_gid)
            os.setgid(info.pw_gid)
            os.setuid(info.pw_uid)
            os.environ.update(USER=user, LOGNAME=user, **env)
            try:
                payload = {"ok": job()}
            except BaseException:  # reported to the parent, which fails the test
                payload = {"error": traceback.format_exc()}
            os.write(write, json.dumps(payload, default=str).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"the child as {user} died"
    finally:
        os.close(read)
    answer = json.loads(b"".join(chunks))
    if "error" in answer:
        raise AssertionError(f"as {user}: {answer['error']}")
    return answer["ok"]
