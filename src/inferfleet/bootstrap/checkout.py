"""The fleet checkout on a host, brought to this revision without ever losing work there.

The host clones or fetches from the fleet repository's remote when it can
reach it. When it cannot (no route to the remote, no credentials there),
the revision is pushed from here over the ssh connection itself:
``git push`` through the connector's master into a private ref of the
host's checkout (``refs/inferfleet/bootstrap``), then ``git merge
--ff-only`` there. Chosen over copying a ``git bundle``: git sends only the
objects the host lacks, updates the ref only after every object arrived and
was checked (a dropped link leaves nothing half-done), and needs no temp
file on either side; pushing into a ref that is not checked out is allowed
in a non-bare repository. A checkout with local changes, or with commits
this revision does not contain, is refused and left exactly as it was.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from inferfleet.bootstrap.errors import CheckoutError
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.ssh import SshConnector, quote_path
from inferfleet.errors import ProcessError
from inferfleet.io import process

PUSH_REF = "refs/inferfleet/bootstrap"
MAX_DIRTY = 20
_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_BRANCH_RE = re.compile(r"^[A-Za-z0-9._/-]{1,200}$")
# Remote git never prompts and gives up on an unreachable remote in seconds.
_GIT_ENV = "GIT_TERMINAL_PROMPT=0 GIT_SSH_COMMAND='ssh -o BatchMode=yes -o ConnectTimeout=5' "
_GIT_NET = "git -c http.lowSpeedLimit=1000 -c http.lowSpeedTime=15"
Kind = Literal["absent", "empty", "other", "git"]


@dataclass(frozen=True)
class CheckoutState:
    kind: Kind
    head: str | None = None
    branch: str | None = None
    origin: str | None = None
    dirty: list[str] = field(default_factory=list)
    git: bool = True  # git is installed on the host


def state_script(checkout: str) -> str:
    c = quote_path(checkout)
    return (
        "command -v git >/dev/null 2>&1 || echo nogit; "
        f"if [ ! -e {c} ]; then echo 'kind absent'; exit 0; fi; "
        f"cd {c} 2>/dev/null || {{ echo 'kind other'; exit 0; }}; "
        "if [ -z \"$(ls -A . | head -c 1)\" ]; then echo 'kind empty'; exit 0; fi; "
        'if [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ]; then '
        "echo 'kind other'; exit 0; fi; "
        "echo 'kind git'; "
        'echo "head $(git rev-parse -q --verify HEAD 2>/dev/null)"; '
        'echo "branch $(git symbolic-ref -q --short HEAD 2>/dev/null)"; '
        'echo "origin $(git config --get remote.origin.url 2>/dev/null | head -c 1000)"; '
        f"git status --porcelain 2>/dev/null | head -n {MAX_DIRTY} | sed 's/^/dirty /'"
    )


def parse_state(text: str) -> CheckoutState:
    """The state script's output; anything unexpected reads as ``other`` (never clobbered)."""
    kind: Kind = "other"
    head = branch = origin = None
    dirty: list[str] = []
    git = True
    for line in text[: 64 * 1024].splitlines():
        key, _, value = line.partition(" ")
        value = value.strip()
        if key == "nogit":
            git = False
        elif key == "kind" and value in ("absent", "empty", "other", "git"):
            kind = value  # type: ignore[assignment]
        elif key == "head":
            head = value if _SHA_RE.match(value) else None
        elif key == "branch":
            branch = value if _BRANCH_RE.match(value) else None
        elif key == "origin":
            origin = value if value and value.isprintable() else None
        elif key == "dirty" and len(dirty) < MAX_DIRTY:
            dirty.append("".join(c for c in value if c.isprintable())[:200])
    return CheckoutState(kind, head, branch, origin, dirty, git)


def read_state(conn: SshConnector, checkout: str) -> CheckoutState:
    return parse_state(conn.run(state_script(checkout), timeout=60).stdout)


def refuse_unsafe(state: CheckoutState, checkout: str, host: str) -> None:
    """Refuse a checkout bootstrap must not touch: not a checkout, or with local changes."""
    where = f"host {host}: {checkout}"
    if not state.git:
        raise CheckoutError(
            "git is not installed on the host", where=f"host {host}",
            hint="install it there (Debian/Ubuntu: apt-get install git) and run again",
        )  # fmt: skip
    if state.kind == "other":
        raise CheckoutError(
            "the host's checkout folder exists and is not a git checkout of its own",
            where=where,
            hint="move it away on the host, or set the host's checkout: in the fleet file "
            "to a free folder",
        )
    if state.dirty:
        shown = ", ".join(state.dirty[:5]) + (" ..." if len(state.dirty) > 5 else "")
        raise CheckoutError(
            f"the host's checkout has local changes ({shown}); bootstrap never overwrites them",
            where=where,
            hint=f"look at them on the host (git -C {checkout} status); commit and push them, "
            f"or stash them (git -C {checkout} stash), then run again",
        )


@dataclass(frozen=True)
class Ours:
    """The operator's side: the revision to ship, its branch, the remote's URL."""

    repo: Repo
    revision: str
    branch: str
    remote_url: str | None

    @classmethod
    def of(cls, repo: Repo) -> Ours:
        branch = repo.git("symbolic-ref", "-q", "--short", "HEAD", check=False).strip()
        if not branch or not _BRANCH_RE.match(branch):
            raise CheckoutError(
                "HEAD is detached here: a host's checkout follows a branch",
                where=str(repo.root),
                hint="check out the branch you deploy from (git switch main) and run again",
            )
        url = repo.git("config", "--get", "remote.origin.url", check=False).strip() or None
        return cls(repo, repo.head(), branch, url)


def sync(conn: SshConnector, checkout: str, state: CheckoutState, ours: Ours) -> str:
    """Bring the host's checkout to ``ours.revision``; returns what was done.

    ``unchanged`` (already there), ``cloned`` / ``fetched`` (from the remote),
    ``pushed`` (over ssh). ``state`` must have passed :func:`refuse_unsafe`.
    """
    if state.kind == "git" and state.head == ours.revision and state.branch == ours.branch:
        return "unchanged"
    c = quote_path(checkout)
    how = ""
    fresh = state.kind in ("absent", "empty")
    if fresh and ours.remote_url:
        url = shlex.quote(ours.remote_url)
        done = conn.run(f"{_GIT_ENV}{_GIT_NET} clone -q -- {url} {c}", timeout=600, check=False)
        if done.returncode == 0:
            how, fresh = "cloned", False
        elif state.kind == "absent":
            conn.run(f"rm -rf {c}", timeout=120, check=False)  # what a failed clone left
    elif not fresh and state.origin:
        done = conn.run(f"cd {c} && {_GIT_ENV}{_GIT_NET} fetch -q origin", timeout=600, check=False)
        if done.returncode == 0:
            how = "fetched"
    if fresh:
        conn.run(f"mkdir -p {c} && git -C {c} init -q", timeout=60)
        if ours.remote_url:
            conn.run(f"git -C {c} remote add origin {shlex.quote(ours.remote_url)}", timeout=60)
    if not _has(conn, c, ours.revision):
        _push(conn, checkout, ours)
        how = "pushed"
    _move(conn, c, checkout, ours, fresh=fresh)
    conn.run(f"git -C {c} update-ref -d {PUSH_REF} 2>/dev/null; true", timeout=60)
    after = read_state(conn, checkout)
    if after.head != ours.revision:
        raise CheckoutError(
            f"the host's checkout is at {after.head or 'no commit'}, not {ours.revision[:12]}",
            where=f"host {conn.name}: {checkout}",
            hint=f"look at it on the host (git -C {checkout} log -1) and run again",
        )
    return how or "updated"


def _has(conn: SshConnector, c: str, revision: str) -> bool:
    done = conn.run(f"git -C {c} cat-file -e {revision}^{{commit}}", timeout=60, check=False)
    return done.returncode == 0


def _push(conn: SshConnector, checkout: str, ours: Ours) -> None:
    """``git push`` of the revision over the connector's ssh master into a private ref."""
    address = conn.target.address
    host = f"[{address}]" if ":" in address else address
    # scp-like syntax: a path is relative to the ssh user's home; ~/x is home-relative too.
    path = checkout[2:] if checkout.startswith("~/") else checkout
    env = {**os.environ, "GIT_SSH_COMMAND": conn.git_ssh_command(), "GIT_TERMINAL_PROMPT": "0"}
    argv = ["git", "push", "--quiet", "--no-verify", f"{host}:{path}"]
    argv.append(f"{ours.revision}:{PUSH_REF}")
    conn.connect()
    try:
        done = process.run(argv, cwd=ours.repo.root, env=env, timeout=900, check=False)
    except ProcessError as exc:
        raise CheckoutError(exc.message, where=f"host {conn.name}", hint=exc.hint) from None
    if done.returncode != 0:
        raise CheckoutError(
            "git push over ssh into the host's checkout failed",
            where=f"host {conn.name}: {checkout}",
            hint="check that git is installed there (git-receive-pack on its PATH) and that "
            "the folder is writable by the ssh user",
            log_tail="\n".join((done.stderr or done.stdout).strip().splitlines()[-10:]),
        )


def _move(conn: SshConnector, c: str, checkout: str, ours: Ours, *, fresh: bool) -> None:
    """On the host: onto the branch, fast-forward only, and an upstream for deploy's pulls."""
    rev, branch = ours.revision, shlex.quote(ours.branch)
    if fresh:
        steps = [f"git -C {c} checkout -q -B {branch} {rev}"]
    else:
        has_branch = conn.run(
            f"git -C {c} show-ref -q --verify refs/heads/{branch}", timeout=60, check=False
        )
        switch = (
            f"git -C {c} checkout -q {branch}"
            if has_branch.returncode == 0
            else f"git -C {c} checkout -q -b {branch} {rev}"
        )
        steps = [switch, f"git -C {c} merge -q --ff-only {rev}"]
    for step in steps:
        done = conn.run(step, timeout=300, check=False)
        if done.returncode != 0:
            raise CheckoutError(
                f"the host's checkout cannot move to {rev[:12]} without a merge: its branch "
                f"{ours.branch} has commits this revision does not contain",
                where=f"host {conn.name}: {checkout}",
                hint=f"look at them on the host (git -C {checkout} log {rev[:12]}..HEAD); push "
                "them to the remote and pull here, or remove them there, then run again",
                log_tail="\n".join((done.stderr or done.stdout).strip().splitlines()[-6:]),
            )
    conn.run(
        f"cd {c} && if ! git config --get branch.{branch}.remote >/dev/null && "
        "git config --get remote.origin.url >/dev/null; then "
        f"git config branch.{branch}.remote origin && "
        f"git config branch.{branch}.merge refs/heads/{branch}; fi",
        timeout=60,
    )
