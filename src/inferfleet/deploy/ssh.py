"""The one SSH connector: the OpenSSH client, multiplexed, through the one process runner.

Using the user's own ``ssh`` means ``~/.ssh/config`` (aliases, users, ports,
``ProxyJump``), agents and known hosts work as they do by hand. One master
connection per host (``ControlMaster``) carries every command of a deploy:
about 30 ms a command instead of a full handshake each. The master lingers
for ``ControlPersist`` seconds so that ``plan`` then ``deploy`` share it.

``BatchMode`` keeps ssh from ever prompting; ``ServerAliveInterval`` turns a
dropped connection into an error within seconds instead of a hang.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shlex
import socket
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferfleet.deploy.errors import SshError
from inferfleet.errors import ProcessError
from inferfleet.fleetfile.fleet import Host
from inferfleet.io import process
from inferfleet.io.files import private_dir

SSH_FAILED = 255  # ssh's own failures; any other status is the remote command's
CONNECT_TIMEOUT = 5
ALIVE_INTERVAL = 2
ALIVE_COUNT = 3
PERSIST = 60

_UNREACHABLE = (
    "timed out",
    "no route to host",
    "connection refused",
    "could not resolve",
    "network is unreachable",
    "name or service not known",
)
_DROPPED = ("not responding", "closed by remote", "broken pipe", "connection reset", "timeout")


@dataclass(frozen=True)
class Target:
    name: str  # the host's name in the fleet file
    address: str  # an address or an ssh alias
    user: str | None = None
    port: int | None = None

    @classmethod
    def of(cls, name: str, host: Host) -> Target:
        return cls(name, host.address or name, host.ssh.user, host.ssh.port)

    def __post_init__(self) -> None:
        # The schema refuses these; a Target built in code must not become an ssh option.
        if not self.address or self.address.startswith("-") or not self.address.isprintable():
            raise SshError(
                f"{self.address!r} is not a host address",
                where=f"host {self.name}",
                hint="give the host a name, an IP address or an ssh alias",
            )

    def describe(self) -> str:
        who = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{who}{self.address}{port}"


class Connector(abc.ABC):
    """Runs shell command lines on one host, and says where and how inferfleet runs there."""

    name: str
    # Whether apply there must pull the pushed revision first (a checkout of its own).
    pulls: bool

    @abc.abstractmethod
    def workdir(self, checkout: str) -> str:
        """The folder ``apply`` runs in, quoted for the shell (``checkout``: the host's)."""

    @abc.abstractmethod
    def program(self, command: str) -> str:
        """How inferfleet is invoked there (``command``: the configured remote command)."""

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        check: bool = True,
        limit: int | None = None,
    ) -> process.Completed:
        """Run ``command`` there; ``limit``: at most that many bytes of output are read;
        ``check``: a non-zero exit is an SshError."""
        done = self._execute(command, timeout, limit)
        if check and done.returncode != 0:
            raise self._exited(command, done)
        return done

    @abc.abstractmethod
    def _execute(self, command: str, timeout: float | None, limit: int | None) -> process.Completed:
        """Run ``command`` there, whatever its exit status."""

    @abc.abstractmethod
    def _exited(self, command: str, done: process.Completed) -> SshError:
        """The error of ``command`` that exited non-zero (``done``)."""

    @abc.abstractmethod
    def stream(
        self, command: str, on_line: Callable[[str], None], *, timeout: float | None = None
    ) -> process.Completed: ...

    @abc.abstractmethod
    def close(self) -> None: ...


def quote_path(path: str) -> str:
    """A path for a remote shell: ``~/x`` keeps its tilde (expanded there), the rest is quoted."""
    if path == "~":
        return "~"
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


def control_dir() -> Path:
    """A private folder for the masters' sockets (short: socket paths are limited to 108 bytes)."""
    override = os.environ.get("INFERFLEET_SSH_CONTROL_DIR")
    folder = (
        Path(override)
        if override
        else Path(tempfile.gettempdir()) / f"inferfleet-ssh-{os.getuid()}"
    )
    return private_dir(
        folder,
        error=SshError,
        hint="remove it, or point INFERFLEET_SSH_CONTROL_DIR at a folder only you can use",
    )


class SshConnector(Connector):
    pulls = True

    def __init__(self, target: Target, *, persist: int = PERSIST) -> None:
        self.target = target
        self.name = target.name
        self.persist = persist
        self._folder = control_dir()
        self._connected = False

    def workdir(self, checkout: str) -> str:
        return quote_path(checkout)

    def program(self, command: str) -> str:
        return command

    def options(self) -> list[str]:
        argv = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]
        argv += ["-o", f"ServerAliveInterval={ALIVE_INTERVAL}"]
        argv += ["-o", f"ServerAliveCountMax={ALIVE_COUNT}"]
        argv += ["-o", f"ControlPath={self._folder}/%C", "-o", "LogLevel=ERROR"]
        config = os.environ.get("INFERFLEET_SSH_CONFIG")
        if config:
            argv += ["-F", config]
        if self.target.user:
            argv += ["-l", self.target.user]
        if self.target.port:
            argv += ["-p", str(self.target.port)]
        return argv

    def _argv(self, *extra: str) -> list[str]:
        # "--" ends ssh's options: nothing after it (the destination, the command)
        # is ever read as one, whatever it starts with.
        return ["ssh", *self.options(), *extra, "--", self.target.address]

    def connect(self) -> None:
        """Start (or find) the master connection; raises SshError when the host is unreachable."""
        if self._connected:
            return
        check = process.run([*self._argv("-O", "check")], check=False, timeout=10)
        if check.returncode == 0:
            self._connected = True
            return
        self._remove_stale_socket()
        # With ControlPersist the master backgrounds itself after authenticating
        # (stdio on /dev/null), so this returns once the connection is up.
        done = self._ssh(
            self._argv("-o", "ControlMaster=yes", "-o", f"ControlPersist={self.persist}", "-N"),
            timeout=CONNECT_TIMEOUT * 3 + 5,
        )
        if done.returncode != 0:
            raise self._error(done, during="connect")
        self._connected = True

    def _remove_stale_socket(self) -> None:
        """Remove the socket of a master that is gone (killed, or its machine crashed).

        With ``ControlMaster=yes`` ssh will not replace an existing socket: it
        disables multiplexing and, with ``-N``, never returns, so every later
        deploy would hang until its timeout. Only a socket that refuses a
        connection is removed: nobody listens on it, a live master is never cut off.
        """
        shown = process.run([*self._argv("-G")], check=False, timeout=10)
        path = next(
            (
                ln.split(" ", 1)[1]
                for ln in shown.stdout.splitlines()
                if ln.startswith("controlpath ")
            ),
            "",
        )
        if not path or not path.startswith(str(self._folder) + "/"):
            return  # a ControlPath of the user's ssh config: theirs to manage
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                return
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(2)
                probe.connect(path)
        except ConnectionRefusedError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        except OSError:
            return

    def _execute(self, command: str, timeout: float | None, limit: int | None) -> process.Completed:
        self.connect()
        argv = [*self._argv("-T", "-o", "ControlMaster=no"), command]
        done = self._ssh(argv, timeout, limit=limit)
        if done.returncode == SSH_FAILED:
            raise self._error(done, during="command")
        return done

    def _exited(self, command: str, done: process.Completed) -> SshError:
        return _exited(
            command,
            done,
            f" on {self.name}",
            hint=f"run it by hand to see more: ssh {self.target.describe()} ...",
        )

    def stream(
        self, command: str, on_line: Callable[[str], None], *, timeout: float | None = None
    ) -> process.Completed:
        """Run ``command``, handing each output line (stdout and stderr merged) to ``on_line``."""
        return self._session(command, timeout, during="stream", on_line=on_line)

    def put(self, local: Path, remote: str, *, timeout: float = 600) -> None:
        """Copy the file ``local`` to ``remote`` (a path as the host's shell reads it).

        The bytes go over the same master connection on the command's stdin
        into a temp file beside the destination, renamed over it once complete:
        no sftp subsystem or scp needed there, and never a half-written file.
        """
        staged = f"{remote}.inferfleet-part"
        command = f"cat > {staged} && mv -f {staged} {remote}"
        done = self._session(command, timeout, during="copy", stdin=local)
        if done.returncode != 0:
            raise _exited(
                f"copy {local.name} to {remote}",
                done,
                f" on {self.name}",
                where=f"host {self.name}",
                hint="check that the folder exists there and has space",
            )

    def forward(self, local_port: int, address: str, port: int) -> Callable[[], None]:
        """Forward this machine's ``127.0.0.1:local_port`` to ``address:port`` as the host
        reaches it (its loopback, say), over the master connection; returns the undo."""
        self.connect()
        there = f"[{address}]" if ":" in address else address
        spec = f"127.0.0.1:{local_port}:{there}:{port}"
        done = self._ssh(self._argv("-O", "forward", "-L", spec), timeout=15)
        if done.returncode != 0:
            raise SshError(
                f"cannot forward local port {local_port} to {there}:{port} on {self.name}: "
                + ((done.stderr or done.stdout).strip().splitlines() or ["ssh failed"])[-1],
                where=f"host {self.name} ({self.target.describe()})",
                hint="check that the host's sshd allows TCP forwarding (AllowTcpForwarding)",
            )

        def cancel() -> None:
            process.run(self._argv("-O", "cancel", "-L", spec), check=False, timeout=10)

        return cancel

    def git_ssh_command(self) -> str:
        """``GIT_SSH_COMMAND`` for git to reach the host through this connector's master."""
        return shlex.join(["ssh", *self.options(), "-o", "ControlMaster=no"])

    def _session(
        self,
        command: str,
        timeout: float | None,
        *,
        during: str,
        on_line: Callable[[str], None] | None = None,
        stdin: Path | None = None,
    ) -> process.Completed:
        """One command over the master; ssh's own failure (255) is an SshError."""
        self.connect()
        argv = [*self._argv("-T", "-o", "ControlMaster=no"), command]
        try:
            done = process.run(argv, check=False, timeout=timeout, on_line=on_line, stdin=stdin)
        except ProcessError as exc:
            raise SshError(exc.message, hint=exc.hint, where=self.name) from None
        if done.returncode == SSH_FAILED:
            self._connected = False
            raise self._error(done, during=during)
        return done

    def close(self) -> None:
        """Ask the master to exit (it would after ``persist`` idle seconds anyway)."""
        process.run([*self._argv("-O", "exit")], check=False, timeout=10)
        self._connected = False

    def _ssh(
        self, argv: list[str], timeout: float | None, *, limit: int | None = None
    ) -> process.Completed:
        try:
            return process.run(argv, check=False, timeout=timeout, limit=limit)
        except ProcessError as exc:
            raise SshError(exc.message, hint=exc.hint, where=self.name) from None

    def _error(self, done: process.Completed, *, during: str) -> SshError:
        text = (done.stderr + "\n" + done.stdout).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        last = lines[-1] if lines else f"ssh exited with status {done.returncode}"
        lowered = text.lower()
        where = f"host {self.name} ({self.target.describe()})"
        if during == "connect" and any(k in lowered for k in _UNREACHABLE):
            return SshError(
                f"cannot reach the host over ssh: {last}",
                where=where,
                hint="check that it is up and that `ssh "
                f"{self.target.describe()}` works from here (your ~/.ssh/config applies)",
            )
        if "permission denied" in lowered:
            return SshError(
                f"ssh refused the login: {last}",
                where=where,
                hint="load the key into your agent or name it in ~/.ssh/config (IdentityFile); "
                "inferfleet never asks for passwords",
            )
        if "host key verification failed" in lowered:
            return SshError(
                f"the host key is not known or has changed: {last}",
                where=where,
                hint=f"connect once by hand (ssh {self.target.describe()}) and check the key",
            )
        if during != "connect" or any(k in lowered for k in _DROPPED):
            return SshError(
                f"the ssh connection dropped: {last}",
                where=where,
                hint="whatever ran on the host may have finished there; run the same command "
                "again once the host is reachable: it converges",
            )
        return SshError(f"ssh failed: {last}", where=where, hint="try `ssh` by hand")


def _exited(
    command: str, done: process.Completed, on: str, *, where: str = "", hint: str = ""
) -> SshError:
    """A command that ran and exited non-zero, with the last lines of its output."""
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
    return SshError(
        f"`{command[:120]}` exited with status {done.returncode}{on}: {tail}",
        where=where,
        hint=hint,
    )


class LocalConnector(Connector):
    """The machine inferfleet runs on: the same command lines, through ``sh``.

    With ``repository`` (the operator's own checkout, for plan and deploy),
    ``apply`` runs there with this very interpreter: no ssh, no push, no pull
    for this host; still gated, locked and marked as on any host.
    """

    def __init__(self, name: str, repository: Path | None = None) -> None:
        self.name = name
        self.repository = repository
        self.pulls = repository is None

    def workdir(self, checkout: str) -> str:
        return (
            quote_path(checkout) if self.repository is None else shlex.quote(str(self.repository))
        )

    def program(self, command: str) -> str:
        if self.repository is None:
            return command
        return shlex.join([sys.executable, "-m", "inferfleet"])

    def _execute(self, command: str, timeout: float | None, limit: int | None) -> process.Completed:
        return process.run(["sh", "-c", command], check=False, timeout=timeout, limit=limit)

    def _exited(self, command: str, done: process.Completed) -> SshError:
        return _exited(command, done, "", where=f"host {self.name}")

    def stream(
        self, command: str, on_line: Callable[[str], None], *, timeout: float | None = None
    ) -> process.Completed:
        return process.run(["sh", "-c", command], check=False, timeout=timeout, on_line=on_line)

    def close(self) -> None:
        return None


def connector_for(name: str, host: Host, *, repository: Path | None = None) -> Connector:
    """ssh for a remote host; this machine for a local one (in ``repository`` when given)."""
    if host.is_local(name):
        return LocalConnector(name, repository)
    return SshConnector(Target.of(name, host))
