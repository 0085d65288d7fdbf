"""The one place inferfleet runs subprocesses.

Two shapes: :func:`run` for a command we wait for (a build step, ``pip
download``, ``--version``) and :func:`spawn_detached` for a long-lived server
that must outlive the CLI (its own session, stdin closed, output to a log
file). Stopping is always by pid, never by name (L-43): see
:func:`terminate`.
"""

from __future__ import annotations

import contextlib
import io
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from inferfleet.errors import ProcessError

# psutil loads with the first server started or stopped: `run` (git, a build
# step) is on the path of every deploy and needs none of it.
if TYPE_CHECKING:
    import psutil


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    on_line: Callable[[str], None] | None = None,
    stdin: Path | None = None,
    limit: int | None = None,
) -> Completed:
    """Run ``argv`` (a list, never a shell string) and wait for it.

    With ``on_line`` the merged output is streamed line by line (for progress
    of long builds) and returned in ``stdout``. With ``stdin`` the command
    reads that file's bytes (a file sent over ssh); otherwise nothing. With
    ``limit`` the command is killed once its output (stdout and stderr
    together) passes that many bytes: a ProcessError, never a full memory.
    """
    argv = [str(a) for a in argv]
    call = _Call(argv, cwd, None if env is None else dict(env), timeout)
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(stdin.open("rb")) if stdin is not None else None
        try:
            if limit is not None:
                done = _run_bounded(call, limit)
            elif on_line is not None:
                done = _run_streaming(call, on_line)
            else:
                done = _run_captured(call, source)
        except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
            raise call.error(exc) from exc
    if check and done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ProcessError(
            f"{' '.join(argv[:4])} ... exited with status {done.returncode}\n{tail}",
            hint="read the output above; rerun with INFERFLEET_DEBUG=1 for details",
        )
    return done


@dataclass(frozen=True)
class _Call:
    """One command as :func:`run` was asked for it, for the three ways of waiting for it;
    ``run`` turns what they raise (not found, too slow) and a failed exit into its
    ProcessError, the same for all three."""

    argv: list[str]
    cwd: Path | None
    env: dict[str, str] | None
    timeout: float | None

    def error(self, exc: FileNotFoundError | subprocess.TimeoutExpired) -> ProcessError:
        """What :func:`run` says of a command that is not there or took too long."""
        if isinstance(exc, FileNotFoundError):
            return ProcessError(
                f"cannot run {self.argv[0]!r}: not found",
                hint=f"install {Path(self.argv[0]).name} or put it on PATH",
            )
        return ProcessError(
            f"{' '.join(self.argv[:3])} ... did not finish within {self.timeout or 0:.0f} s",
            hint="check that the command is not waiting for input or for the network",
        )

    def deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def popen(self, *, merged: bool) -> subprocess.Popen[bytes]:
        """The command started, stdin closed, stdout piped; stderr piped apart or ``merged``
        into stdout."""
        stderr = subprocess.STDOUT if merged else subprocess.PIPE
        return subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


def _run_captured(call: _Call, source: BinaryIO | None) -> Completed:
    proc = subprocess.run(
        call.argv,
        cwd=call.cwd,
        env=call.env,
        capture_output=True,
        text=True,
        errors="replace",  # a program's bytes are not always UTF-8
        timeout=call.timeout,
        stdin=subprocess.DEVNULL if source is None else source,
        check=False,
    )
    return Completed(tuple(call.argv), proc.returncode, proc.stdout, proc.stderr)


def _run_bounded(call: _Call, limit: int) -> Completed:
    """A command whose output is input from elsewhere (another host): read as it comes,
    killed past ``limit`` bytes or ``timeout`` seconds."""
    argv, timeout, deadline = call.argv, call.timeout, call.deadline()
    total = 0
    proc = call.popen(merged=False)
    assert proc.stdout is not None and proc.stderr is not None
    fds = (proc.stdout.fileno(), proc.stderr.fileno())
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
    too_slow = ProcessError(
        f"{Path(argv[0]).name} did not finish within {timeout or 0:g} s",
        hint="check that the command is not waiting for input or for the network",
    )
    with proc, selectors.DefaultSelector() as selector:
        for pipe in (proc.stdout, proc.stderr):
            selector.register(pipe, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise too_slow
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 65536)
                    if not data:
                        selector.unregister(key.fileobj)
                        continue
                    total += len(data)
                    if total > limit:
                        raise ProcessError(
                            f"{Path(argv[0]).name} printed more than {limit} bytes: stopped",
                            hint="what it prints is read whole; it should never be this large",
                        )
                    chunks[key.fd].append(data)
            left = None if deadline is None else max(0.1, deadline - time.monotonic())
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                raise too_slow from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    out, err = (b"".join(chunks[fd]).decode("utf-8", "replace") for fd in fds)
    return Completed(tuple(argv), proc.returncode, out, err)


def _run_streaming(call: _Call, on_line: Callable[[str], None]) -> Completed:
    argv, timeout, deadline = call.argv, call.timeout, call.deadline()
    lines: list[str] = []
    with call.popen(merged=True) as proc:
        assert proc.stdout is not None
        # Read as text the way Popen(text=True) would: the locale's encoding, universal
        # newlines; a program's bytes are not always UTF-8.
        output = io.TextIOWrapper(proc.stdout, errors="replace")
        try:
            for raw in output:
                line = raw.rstrip("\n")
                lines.append(line)
                on_line(line)
                if deadline is not None and time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(argv, timeout or 0)
            proc.wait(timeout=None if deadline is None else max(0.1, deadline - time.monotonic()))
        except BaseException:
            # Interrupted or timed out: do not leave the child running.
            proc.kill()
            proc.wait()
            raise
    return Completed(tuple(argv), proc.returncode, "\n".join(lines), "")


def spawn_detached(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> psutil.Process:
    """Start a server in its own session, detached from our terminal.

    Output (stdout and stderr) is appended to ``log_path``. Returns the
    process handle; callers record its pid and create time (a pid alone can
    be reused by an unrelated process).
    """
    import psutil

    argv = [str(a) for a in argv]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        try:
            popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=None if env is None else dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError as exc:
            raise ProcessError(
                f"cannot start {argv[0]!r}: not found",
                hint="install the runtime (inferfleet runtime install llama.cpp) or fix its path",
            ) from exc
        except PermissionError as exc:
            raise ProcessError(
                f"cannot start {argv[0]!r}: permission denied",
                hint=f"make it executable: chmod +x {argv[0]}",
            ) from exc
    # The Popen object is dropped on purpose: the server outlives this CLI and
    # is tracked by pid + create time from here on. Reap it if it dies while
    # we are still running so it does not linger as a zombie.
    _reapers[popen.pid] = popen
    return psutil.Process(popen.pid)


# Children we spawned in this process; polled so an early exit is reaped.
_reapers: dict[int, subprocess.Popen[bytes]] = {}


def reap(pid: int) -> int | None:
    """Return the exit code if ``pid`` is our child and has exited."""
    popen = _reapers.get(pid)
    if popen is None:
        return None
    return popen.poll()


def terminate(proc: psutil.Process, *, grace: float = 10.0) -> str:
    """Stop one process by pid: SIGTERM, then SIGKILL after ``grace`` seconds.

    Returns ``"terminated"``, ``"killed"`` or ``"gone"``. Also signals the
    process group when the process leads its own session (so a server's
    helpers do not survive it), but never anything found by name (L-43).
    A group is stopped when all of it is gone, not only its leader: vLLM's
    API server exits on SIGTERM before its EngineCore workers do, and a
    worker left behind spins at 100% CPU holding the KV cache.
    """
    import psutil

    try:
        leads_group = os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return "gone"
    group = proc.pid if leads_group else None
    try:
        if leads_group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return "gone"
    deadline = time.monotonic() + grace
    if _wait_gone(proc, grace) and _wait_group_gone(group, deadline - time.monotonic()):
        return "terminated"
    try:
        if leads_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, psutil.NoSuchProcess):
        return "terminated"
    if not (_wait_gone(proc, 10.0) and _wait_group_gone(group, 10.0)):
        raise ProcessError(
            f"process {proc.pid} (or a process of its group) survived SIGKILL",
            hint="it may be stuck in the kernel (D state); check `ps -o pid,stat -g PID`",
        )
    return "killed"


def _group_members(group: int) -> list[int]:
    """Live (not zombie) processes whose process group is ``group``."""
    import psutil

    members = []
    for candidate in psutil.process_iter():
        try:
            if os.getpgid(candidate.pid) == group and candidate.status() != psutil.STATUS_ZOMBIE:
                members.append(candidate.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def _wait_group_gone(group: int | None, timeout: float) -> bool:
    """Whether the group ``group`` (None: no group of ours) has no live member by then."""
    if group is None:
        return True
    deadline = time.monotonic() + max(timeout, 0.0)
    while _group_members(group):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _wait_gone(proc: psutil.Process, timeout: float) -> bool:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        popen = _reapers.get(proc.pid)
        if popen is not None:
            popen.poll()
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                # It exited between the poll and now. Ours: reap it here (it has
                # exited, so this returns at once), else a long-lived caller keeps
                # a zombie. Not ours: a zombie holds no port and no memory; its
                # parent will reap it.
                if popen is not None:
                    popen.wait()
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False
