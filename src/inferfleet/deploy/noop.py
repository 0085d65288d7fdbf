"""The host side of a no-op deploy, answered at SSH speed.

Most hosts of most deploys have nothing to do, and ``apply --pull --expect
REV`` used to pay an interpreter, pydantic and the fleet model (about a
quarter of a second of CPU per host) to learn again what its previous run
already knew. So when an apply leaves every service of its host at its
revision, the host writes a *memo* beside its deploy lock: everything that
conclusion depended on, which is everything the plan is a function of
(:func:`inferfleet.deploy.planner.plan_host`):

- the fleet file's blob id (every section digest comes from it);
- the blob ids of every repository file the host's services' inputs name
  (declared files and ``paths`` patterns, re-matched, so a new file under a
  watched folder counts);
- the stat signature (name, size, mtime, inode) of the markers (L-41), which
  are only ever replaced by rename;
- the code that plans (inferfleet's version and the stat signature of the
  modules that plan and validate);
- the processes that serve: each kept service's pid and its start time
  (``/proc/PID/stat``), since the plan reads facts too (a marker that matches
  HEAD over a dead or replaced process is a deploy, planner.with_states):
  a process gone or a pid reused sends the apply down the full path.

The deploy's form of apply (``--file --host --pull --expect --events``, no
other option) checks exactly those, under the same host lock, after the same
``git pull --ff-only``, with one ``git ls-tree`` and a few ``stat`` calls.
When all match, the host answers the events and result document the full
apply would; when anything differs, or the memo is missing, damaged or for
another host, the full apply runs and decides (it never reads the memo).

Standard library and inferfleet's light modules only: this runs before Typer
or pydantic is imported (tests/deploy/test_noop_memo.py checks both).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inferfleet import __version__
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.repofiles import RepoFiles
from inferfleet.errors import FleetError
from inferfleet.fleetfile.discover import FLEET_FILE_NAME
from inferfleet.io.files import atomic_write

MEMO_NAME = "inferfleet-noop.json"  # in the checkout's git directory, beside the lock
MEMO_VERSION = 2
MAX_MEMO_BYTES = 4 * 1024 * 1024
# The modules whose code decides a plan: an edit to any of them (an upgrade,
# a development checkout) makes every memo stale.
_PLANNING_CODE = ("deploy", "fleetfile")

Signature = list[list[Any]]  # [[name, size, mtime_ns, inode], ...]


@dataclass(frozen=True)
class Memo:
    host: str
    fleet_path: str  # repository path of the fleet file
    fleet_blob: str
    declared: list[str]  # files the host's services declare (repository paths)
    patterns: list[str]  # their ``paths`` patterns
    files: dict[str, str]  # what declared + patterns named: path -> blob id (or MISSING)
    state_dir: str
    markers: Signature
    result: dict[str, Any]  # the no-op apply document (its revision is replaced)
    processes: dict[str, list[int]]  # service -> [pid, start time in clock ticks]
    code: str = field(default_factory=lambda: code_identity())
    version: int = MEMO_VERSION


def memo_path(git_dir: Path) -> Path:
    return git_dir / MEMO_NAME


def code_identity() -> str:
    """inferfleet's version and the stat signature of the modules that plan."""
    package = Path(__file__).resolve().parent.parent
    parts = [__version__]
    for name in _PLANNING_CODE:
        try:
            entries = sorted(os.scandir(package / name), key=lambda e: e.name)
        except OSError:
            return ""
        for entry in entries:
            if entry.name.endswith(".py"):
                st = entry.stat()
                parts.append(f"{name}/{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def markers_signature(state_dir: Path) -> Signature:
    """(name, size, mtime_ns, inode) of every marker file, sorted by name, then of every
    hold (``holds/NAME.json``): a hold placed or lifted changes what apply plans."""
    found = []
    for folder, prefix in (("markers", ""), ("holds", "holds/")):
        try:
            entries = list(os.scandir(state_dir / folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.name.endswith(".json"):
                st = entry.stat(follow_symlinks=False)
                found.append([prefix + entry.name, st.st_size, st.st_mtime_ns, st.st_ino])
    return sorted(found)


def started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None when there is none.

    With the pid, what identifies a process: a reused pid has another start time.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The program name (field 2) is in parentheses and may hold anything: fields after it.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if fields[:1] == [b"Z"]:
        return None  # exited, not yet reaped: gone all the same
    try:
        return int(fields[19])  # field 22, starttime
    except (IndexError, ValueError):
        return None


def processes_of(pids: Mapping[str, int | None]) -> dict[str, list[int]] | None:
    """Each service's [pid, start time]; None when one of them has no running process."""
    found: dict[str, list[int]] = {}
    for name, pid in pids.items():
        start = None if pid is None else started(pid)
        if pid is None or start is None:
            return None
        found[name] = [pid, start]
    return found


def write(git_dir: Path, memo: Memo) -> None:
    atomic_write(memo_path(git_dir), json.dumps(asdict(memo), sort_keys=True) + "\n")


def forget(git_dir: Path) -> None:
    memo_path(git_dir).unlink(missing_ok=True)


def read(git_dir: Path) -> Memo | None:
    """The memo, or None when it is absent, damaged or of another shape.

    A hostile state file like any other, validated field by field; by hand
    rather than with pydantic (io/state_files.py) because importing pydantic
    costs more than this whole fast path saves. None means "run the full apply".
    """
    try:
        raw = memo_path(git_dir).read_bytes()
    except OSError:
        return None
    if len(raw) > MAX_MEMO_BYTES:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("version") != MEMO_VERSION:
        return None
    text = ("host", "fleet_path", "fleet_blob", "state_dir", "code")
    if not all(isinstance(data.get(k), str) for k in text):
        return None
    if not (_strings(data.get("declared")) and _strings(data.get("patterns"))):
        return None
    files = data.get("files")
    if not isinstance(files, dict) or not _strings(list(files.values())):
        return None
    markers = data.get("markers")
    if not isinstance(markers, list) or not all(_signature_row(row) for row in markers):
        return None
    processes = data.get("processes")
    if not isinstance(processes, dict) or not all(
        isinstance(v, list) and len(v) == 2 and all(_int(x) for x in v) for v in processes.values()
    ):
        return None
    result = data.get("result")
    if not isinstance(result, dict) or result.get("ok") is not True or result.get("selected"):
        return None
    return Memo(**{k: data[k] for k in Memo.__dataclass_fields__})


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _signature_row(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 4
        and isinstance(row[0], str)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in row[1:])
    )


# ---------------------------------------------------------------- the fast path


@dataclass(frozen=True)
class DeployForm:
    """``apply --file F --host H --pull --expect REV --events``, as the deployer sends it."""

    fleet_file: Path
    host: str
    expect: str


def deploy_form(argv: Sequence[str]) -> DeployForm | None:
    """The options of a deploy's apply, or None for any other form (the full CLI parses it)."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")
        if name in ("--file", "--host", "--expect"):
            if name in values:
                return None
            if eq:
                values[name] = inline
            elif args:
                values[name] = args.pop(0)
            else:
                return None
        elif arg in ("--pull", "--events", "--offline") and arg not in flags:
            flags.add(arg)  # --offline: a no-op asks neither the Hub nor a package index
        else:
            return None
    if (
        flags - {"--offline"} != {"--pull", "--events"}
        or "--host" not in values
        or "--expect" not in values
    ):
        return None
    if not values["--host"] or not values["--expect"]:
        return None
    return DeployForm(
        Path(values.get("--file", FLEET_FILE_NAME)).absolute(), values["--host"], values["--expect"]
    )


def answer(argv: Sequence[str]) -> bool:
    """Answer a deploy's apply from the memo; False (nothing printed) when it cannot."""
    form = deploy_form(argv)
    if form is None:
        return False
    try:
        return _answer(form)
    except (FleetError, OSError):
        return False  # the full apply meets the same problem and reports it properly


def _answer(form: DeployForm) -> bool:
    from inferfleet.deploy.errors import LockHeldError
    from inferfleet.deploy.lock import LOCK_NAME, HostLock

    repo, git_dir = Repo.with_git_dir(form.fleet_file.parent)
    memo = read(git_dir)
    if memo is None or memo.host != form.host or memo.code != code_identity():
        return False
    if repo.relative(form.fleet_file) != memo.fleet_path:
        return False
    lock = HostLock(git_dir / LOCK_NAME, form.host)
    try:
        lock.acquire("apply of HEAD after a pull")
    except LockHeldError:
        return False
    try:
        if repo.dirty():
            return False
        events: list[dict[str, Any]] = [
            {"event": "pull", "detail": f"git pull --ff-only in {repo.root}"}
        ]
        repo.pull_ff_only()
        head = repo.head()
        if head != form.expect or not matches(memo, repo, head):
            return False
        result = {**memo.result, "revision": head}
        listed = result.get("plan")
        plan = listed if isinstance(listed, list) else []
        held = {
            str(i.get("service")): "; ".join(str(r) for r in i.get("reasons") or [])
            for i in plan
            if isinstance(i, dict) and i.get("action") == "held"
        }
        events.append(
            {"event": "plan", "host": form.host, "revision": head, "selected": [], "held": held}
        )
        events.append({"event": "result", "result": result})
        sys.stdout.write("".join(json.dumps(e) + "\n" for e in events))
        sys.stdout.flush()
        return True
    finally:
        lock.release()


def matches(memo: Memo, repo: Repo, revision: str) -> bool:
    """Whether ``revision`` and the host's markers are what the memo's conclusion needs."""
    if markers_signature(Path(memo.state_dir)) != memo.markers:
        return False
    if any(started(pid) != start for pid, start in memo.processes.values()):
        return False  # a service's process is gone (or its pid reused): the full apply decides
    blobs = repo.blobs(revision)
    if blobs.get(memo.fleet_path) != memo.fleet_blob:
        return False
    return RepoFiles(blobs).inputs(memo.declared, memo.patterns) == memo.files


def memo_of(
    host: str,
    fleet_path: str,
    blobs: Mapping[str, str],
    files: tuple[list[str], list[str]],
    state_dir: Path,
    markers: Signature,
    result: dict[str, Any],
    processes: dict[str, list[int]],
) -> Memo | None:
    """The memo of a host whose plan at a revision with ``blobs`` is all "keep", its kept
    services served by ``processes`` (:func:`processes_of`)."""
    fleet_blob = blobs.get(fleet_path)
    if fleet_blob is None:
        return None
    declared, patterns = files
    return Memo(
        host=host,
        fleet_path=fleet_path,
        fleet_blob=fleet_blob,
        declared=declared,
        patterns=patterns,
        files=RepoFiles(blobs).inputs(declared, patterns),
        state_dir=str(state_dir.absolute()),
        markers=markers,
        result=result,
        processes=processes,
    )
