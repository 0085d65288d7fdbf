"""Privilege escalation: the one place a host's ``become: sudo`` turns a command into ``sudo``.

System-scope units (``/etc/systemd/system``), system Quadlet files
(``/etc/containers/systemd``), ``systemctl`` and rootful ``podman`` of the
system scope need root; user scope needs none. A host whose ssh user is not
root says ``become: sudo`` in the fleet file, and every privileged command
of ``apply`` goes through :class:`Become`:

- :meth:`Become.argv` turns an argv into ``sudo -n -- /abs/path ARGS`` when
  the host says so and this process is not root (root runs it as is);
- :meth:`Become.write` installs a file into a folder we cannot write: the
  bytes go to a private temp file of ours, then ``sudo -n install -D -m MODE``
  puts them next to the destination and ``sudo -n mv -f`` renames them over
  it, so the file is replaced whole or not at all, as :func:`atomic_write` does;
- :meth:`Become.read` and :meth:`Become.remove` read (archive copies) and
  remove files there the same way.

``-n`` never lets sudo prompt: when it wants a password, the command fails
with a :class:`BecomeError` naming the host, the command and a ready
sudoers line for the ssh user.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inferfleet.errors import FleetError
from inferfleet.io import process
from inferfleet.io.files import atomic_write

Method = Literal["sudo"] | None
# What the sudoers entry must allow: every command a deploy runs through sudo.
SUDO_COMMANDS = ("systemctl", "journalctl", "podman", "install", "mv", "rm", "chmod", "ss")
_PASSWORD = ("password is required", "a terminal is required", "no tty present")


class BecomeError(FleetError, PermissionError):
    """A command that needs root could not get it (sudo wants a password, or is missing)."""


def _resolve(name: str) -> str:
    """An absolute path for ``name`` (sudoers entries name absolute paths)."""
    if "/" in name:
        return name
    return shutil.which(name) or f"/usr/bin/{name}"


def sudoers_line(user: str) -> str:
    """A ready sudoers line allowing ``user`` every command a deploy runs through sudo."""
    paths = ", ".join(dict.fromkeys(_resolve(c) for c in SUDO_COMMANDS))
    return f"{user} ALL=(root) NOPASSWD: {paths}"


@dataclass(frozen=True)
class Become:
    """How one host gets root for what needs it (``method`` None: it does not escalate)."""

    host: str = ""
    method: Method = None
    # Who runs the commands: None is this process; a uid read on a host is for
    # argvs built here and run there (``host bootstrap`` over ssh).
    uid: int | None = None
    user: str | None = None

    @property
    def active(self) -> bool:
        """Whether commands are wrapped in sudo: the host says so and we are not root."""
        return self.method == "sudo" and (os.geteuid() if self.uid is None else self.uid) != 0

    def argv(self, argv: Sequence[str], *, privileged: bool = True) -> list[str]:
        """``argv`` as run: through ``sudo -n --`` (the binary by absolute path) when needed."""
        if not (privileged and self.active):
            return list(argv)
        return ["sudo", "-n", "--", _resolve(argv[0]), *argv[1:]]

    def run(
        self,
        argv: Sequence[str],
        *,
        privileged: bool = True,
        timeout: float | None = 120.0,
    ) -> process.Completed:
        """Run ``argv`` (escalated when needed); a sudo that wants a password is a BecomeError."""
        full = self.argv(argv, privileged=privileged)
        done = process.run(full, check=False, timeout=timeout)
        if full[:1] == ["sudo"] and done.returncode != 0:
            self._check_sudo(done, argv)
        return done

    def _check_sudo(self, done: process.Completed, argv: Sequence[str]) -> None:
        text = (done.stderr + "\n" + done.stdout).lower()
        if any(k in text for k in _PASSWORD):
            raise self.error(argv, "sudo asks for a password (it is run with -n: never prompts)")

    def check(self, done: process.Completed, argv: Sequence[str]) -> None:
        """Raise the BecomeError of a refused sudo in ``done`` (an argv from :meth:`argv`,
        run elsewhere, e.g. on a host over ssh)."""
        if self.active:
            self._check_sudo(done, argv)

    def error(self, argv: Sequence[str], why: str) -> BecomeError:
        user = self.user or getpass.getuser()
        shown = " ".join(argv)[:160]
        return BecomeError(
            f"`{shown}` needs root and {why}",
            where=f"host {self.host or '?'} (user {user}, become: sudo)",
            hint=f"allow it without a password: add `{sudoers_line(user)}` to "
            "/etc/sudoers.d/inferfleet on the host (visudo -f), or deploy as root",
        )

    def need(self, path: Path) -> bool:
        """Whether writing at ``path`` needs sudo: its nearest existing folder is not ours."""
        if not self.active:
            return False
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return not os.access(folder, os.W_OK | os.X_OK)

    def write(self, path: Path, data: str | bytes, *, mode: int) -> None:
        """Replace ``path`` with ``data`` atomically (escalated when its folder is not ours)."""
        if not self.need(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, mode=mode)
            return
        payload = data.encode("utf-8") if isinstance(data, str) else data
        with tempfile.TemporaryDirectory(prefix="inferfleet-become-") as scratch:
            source = Path(scratch) / "file"
            atomic_write(source, payload, mode=0o600)
            staged = path.with_name(f".{path.name}.inferfleet-new")
            self._sudo(["install", "-D", "-m", f"{mode:o}", str(source), str(staged)])
            try:
                self._sudo(["mv", "-f", "--", str(staged), str(path)])
            except BaseException:
                with contextlib.suppress(FleetError):
                    self._sudo(["rm", "-f", "--", str(staged)])
                raise

    def read(self, path: Path) -> bytes | None:
        """The bytes of ``path`` (None when missing), read through sudo when we may not read it."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except PermissionError:
            if not self.active:
                raise
        with tempfile.TemporaryDirectory(prefix="inferfleet-become-") as scratch:
            copy = Path(scratch) / "copy"
            owner = [f"-o{os.getuid()}", f"-g{os.getgid()}"]
            self._sudo(["install", "-m", "600", *owner, "--", str(path), str(copy)])
            return copy.read_bytes()

    def remove(self, path: Path) -> None:
        """Unlink ``path`` if there (escalated when its folder is not ours)."""
        if not self.need(path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        self._sudo(["rm", "-f", "--", str(path)])

    def chmod(self, path: Path, mode: int) -> None:
        if not self.need(path):
            os.chmod(path, mode)
            return
        self._sudo(["chmod", f"{mode:o}", "--", str(path)])

    def _sudo(self, argv: list[str]) -> None:
        done = self.run(argv, timeout=60)
        if done.returncode != 0:
            self._failed(argv, done)

    def _failed(self, argv: list[str], done: process.Completed) -> None:
        detail = (done.stderr or done.stdout).strip()[-300:]
        raise self.error(argv, f"failed through sudo: {detail or f'status {done.returncode}'}")


NO_BECOME = Become()


def for_scope(host: str, method: Method, scope: str) -> Become:
    """The escalation for one scope on a host: system scope as the host says, user scope never."""
    return Become(host, method) if scope == "system" else NO_BECOME
