"""The fleet repository as git sees it: revisions, files at a revision, pull and push.

Every git call goes through the one process runner. Plans are made from
committed revisions only (``git show REV:path``, ``git ls-tree``), never from
the working tree, so what is planned is what a host will pull.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from inferfleet.deploy.errors import DirtyTreeError, GitError
from inferfleet.errors import ProcessError
from inferfleet.io import process
from inferfleet.io.files import staged_directory

_GIT_TIMEOUT = 120.0
# The locks a pull takes in the git dir (besides refs/**.lock): left behind by a killed git.
_TOP_LOCKS = (
    "index.lock",
    "HEAD.lock",
    "ORIG_HEAD.lock",
    "FETCH_HEAD.lock",
    "packed-refs.lock",
    "config.lock",
    "shallow.lock",
)
# Pulls and pushes must never stop to ask for a password or an editor.
_QUIET_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_MERGE_AUTOEDIT": "no"}


@dataclass(frozen=True)
class Repo:
    root: Path

    @classmethod
    def containing(cls, path: Path) -> Repo:
        """The repository whose working tree holds ``path`` (a file or folder)."""
        return cls._located(path, "--show-toplevel")[0]

    @classmethod
    def with_git_dir(cls, path: Path) -> tuple[Repo, Path]:
        """The repository holding ``path`` and its git directory, in one git call."""
        repo, lines = cls._located(path, "--show-toplevel", "--absolute-git-dir")
        return repo, Path(lines[1])

    @classmethod
    def _located(cls, path: Path, *asked: str) -> tuple[Repo, list[str]]:
        folder = path if path.is_dir() else path.parent
        done = _git(folder, "rev-parse", *asked, check=False)
        lines = done.stdout.splitlines()
        if done.returncode != 0 or len(lines) != len(asked):
            raise GitError(
                f"{path} is not inside a git repository",
                hint="deploys work from a git repository: git init, commit the fleet file, "
                "and clone it on every host",
            )
        return cls(Path(lines[0])), lines

    def git_dir(self) -> Path:
        return Path(self.git("rev-parse", "--absolute-git-dir").strip())

    def git(self, *args: str, check: bool = True, timeout: float = _GIT_TIMEOUT) -> str:
        done = _git(self.root, *args, check=False, timeout=timeout)
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise GitError(
                f"git {' '.join(args[:3])} failed in {self.root}: "
                f"{detail[-1] if detail else 'status ' + str(done.returncode)}",
                hint="run the same git command by hand to see the whole message",
            )
        return done.stdout

    def relative(self, path: Path) -> str:
        """``path`` as a repository path (POSIX separators)."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            raise GitError(
                f"{path} is outside the repository {self.root}",
                hint="keep the fleet file inside the fleet repository",
            ) from None

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def resolve(self, rev: str) -> str | None:
        """The full commit id ``rev`` names here, or None when this repository lacks it."""
        done = _git(self.root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if done.returncode != 0:
            return None
        return done.stdout.strip() or None

    def dirty(self) -> list[str]:
        """``git status --porcelain`` lines: modified, staged and untracked files."""
        return [ln for ln in self.git("status", "--porcelain").splitlines() if ln.strip()]

    def require_clean(self, what: str) -> None:
        lines = self.dirty()
        if lines:
            shown = ", ".join(ln[3:] for ln in lines[:5]) + (" ..." if len(lines) > 5 else "")
            raise DirtyTreeError(
                f"{what} {self.root} has uncommitted changes ({shown})",
                hint="commit them (or stash/discard them); only committed revisions are "
                "deployed, so the revision recorded for a service is what it runs",
            )

    def show(self, rev: str, path: str) -> str | None:
        """A file's text at ``rev``; None when it does not exist there."""
        done = _git(self.root, "show", f"{rev}:{path}", check=False)
        return done.stdout if done.returncode == 0 else None

    def blobs(self, rev: str) -> dict[str, str]:
        """Every file at ``rev``: repository path -> blob id (one ``ls-tree``)."""
        text = self.git("ls-tree", "-r", "-z", "--full-tree", rev)
        found: dict[str, str] = {}
        for entry in text.split("\0"):
            if not entry:
                continue
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                found[path] = parts[2]
        return found

    def upstream(self) -> str | None:
        done = _git(
            self.root, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}", check=False
        )
        if done.returncode != 0:
            return None
        return done.stdout.strip() or None

    def push(self) -> None:
        """Push the current branch to its upstream; a rejected push is an error.

        Nothing is sent when the upstream already has HEAD; if the remote moved
        on meanwhile, the host's pull then lands elsewhere and apply's --expect
        check says so.
        """
        both = _git(self.root, "rev-parse", "HEAD", "@{u}", check=False)
        revisions = both.stdout.split()
        if both.returncode == 0 and len(revisions) == 2 and revisions[0] == revisions[1]:
            return
        if both.returncode != 0:
            branch = self.git("rev-parse", "--abbrev-ref", "HEAD").strip()
            raise GitError(
                f"branch {branch!r} of {self.root} has no upstream to push to",
                hint=f"set one once: git push -u origin {branch}",
            )
        done = _git(self.root, "push", "--quiet", check=False, timeout=300)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            locked = _held_lock(done.stderr or done.stdout)
            if locked is not None:
                raise GitError(
                    f"git push failed: the remote repository is locked ({locked} exists)",
                    hint=_LOCK_HINT.format(path=locked),
                )
            raise GitError(
                f"git push was refused: {detail[-1] if detail else done.returncode}",
                hint="pull (or rebase onto) the remote first, then deploy again",
            )

    def pull_ff_only(self) -> None:
        """``git pull --ff-only``; a diverged checkout is an error, never a merge.

        Called under the host's deploy lock: a lock file a killed git left
        behind is removed first (:meth:`clear_stale_locks`).
        """
        self.clear_stale_locks()
        done = _git(self.root, "pull", "--ff-only", "--quiet", check=False, timeout=300)
        if done.returncode == 0:
            return
        detail = " ".join((done.stderr or done.stdout).split())
        upstream = self.upstream() or "its upstream"
        ahead = _git(self.root, "rev-list", "--count", f"{upstream}..HEAD", check=False)
        count = ahead.stdout.strip() if ahead.returncode == 0 else "?"
        if "fast-forward" in detail or "diverg" in detail:
            raise GitError(
                f"the checkout {self.root} has diverged from {upstream} ({count} local "
                "commit(s) not on the remote): git pull --ff-only refused to merge",
                hint=f"look at them with `git -C {self.root} log {upstream}..HEAD`; if they are "
                f"not wanted, `git -C {self.root} reset --hard {upstream}`, then deploy again",
            )
        locked = _held_lock(detail)
        raise GitError(
            f"git pull --ff-only failed in {self.root}: {detail[:300]}",
            hint="check that the host can reach the fleet repository's remote"
            if locked is None
            else _LOCK_HINT.format(path=locked),
        )

    def clear_stale_locks(self) -> list[Path]:
        """Remove the lock files of a git that was killed (SIGKILL, a crash) mid-pull.

        git refuses to run while ``index.lock``, ``ORIG_HEAD.lock`` or a ref's
        lock exists, so one pull killed at the wrong instant would fail every
        later deploy of the host. A lock is stale when no git process works in
        this checkout: one that does (``git commit`` waiting for its editor)
        keeps every lock, and the pull then fails with git's own message.
        """
        git_dir = self.root / ".git"
        if not git_dir.is_dir():
            return []  # a worktree or a separate git dir: not a checkout we clone
        found = [git_dir / name for name in _TOP_LOCKS if (git_dir / name).is_file()]
        refs = git_dir / "refs"
        found += [p for p in refs.rglob("*.lock") if p.is_file()] if refs.is_dir() else []
        if not found or _git_running_in(self.root):
            return []
        for path in found:
            path.unlink(missing_ok=True)
        return found

    def export(self, rev: str, dest: Path) -> Path:
        """The tree at ``rev`` as plain files under ``dest`` (made atomically, kept if present)."""
        if dest.is_dir():
            return dest
        data = _git_bytes(self.root, "archive", "--format=tar", rev)
        with staged_directory(dest) as staging, tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(staging, filter="data")
        return dest


_LOCK_HINT = (
    "a git process works there, or one was killed mid-way and left {path} behind: "
    "wait for it to finish; if no git runs there, remove that file and deploy again"
)
_HELD_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def _held_lock(output: str) -> str | None:
    """The lock file git found in its way, from its message."""
    found = _HELD_LOCK.search(" ".join(output.split()))
    return os.path.normpath(found.group(1)) if found else None  # git writes repo/./refs/...


def _git_running_in(root: Path) -> bool:
    """Whether a git process (or a helper it runs: git-*) works in ``root`` now."""
    import psutil

    for proc in psutil.process_iter(["name", "cwd"]):
        name = proc.info.get("name") or ""
        cwd = proc.info.get("cwd") or ""
        if (name == "git" or name.startswith("git-")) and (
            cwd == str(root) or cwd.startswith(f"{root}/")
        ):
            return True
    return False


def _git(
    cwd: Path, *args: str, check: bool = False, timeout: float = _GIT_TIMEOUT
) -> process.Completed:
    try:
        return process.run(
            ["git", *args],
            cwd=cwd,
            env={**os.environ, **_QUIET_ENV},
            timeout=timeout,
            check=check,
        )
    except ProcessError as exc:
        raise GitError(exc.message, hint=exc.hint) from None


def _git_bytes(cwd: Path, *args: str) -> bytes:
    # `git archive` writes binary; the text runner would mangle it, so it goes
    # through a temporary file that git writes itself.
    fd, name = tempfile.mkstemp(prefix="inferfleet-archive-", suffix=".tar")
    os.close(fd)
    out = Path(name)
    try:
        _git(cwd, *args, f"--output={out}", check=True)
        return out.read_bytes()
    finally:
        out.unlink(missing_ok=True)
