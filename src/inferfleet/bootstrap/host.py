"""The host side of a bootstrap: its Python, inferfleet's venv there, what is installed in it.

Each fact is a shell command run over the connector plus a pure parser of
its output (tested from captured text); each change is one command whose
failure names the host, the command's last lines and the fix.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferfleet.bootstrap.errors import BootstrapError, HostPythonError
from inferfleet.bootstrap.wheels import HostPlatform, Wheel
from inferfleet.deploy.ssh import SshConnector, quote_path

Deps = Literal["index", "wheelhouse"]
MIN_PYTHON = (3, 11)
RECORD = "inferfleet-bootstrap.json"  # in the venv: what bootstrap installed there
MAX_OUTPUT = 64 * 1024
_VERSION_RE = re.compile(r"^Python (\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")
_INFERFLEET_RE = re.compile(r"^inferfleet (\S{1,64})$")
_PYTHON_FIX = (
    "install Python 3.11 or newer with its venv module there (Debian/Ubuntu: "
    "apt-get install python3 python3-venv), or name another interpreter with --python PATH"
)

# Read on the host by its Python: CPU, C library, and whether venv + ensurepip exist
# (Debian splits them into python3-venv).
_PROBE = (
    "import json, platform, importlib.util as u; "
    "print(json.dumps({'machine': platform.machine(), 'libc': list(platform.libc_ver()), "
    "'venv': u.find_spec('venv') is not None and u.find_spec('ensurepip') is not None}))"
)


@dataclass(frozen=True)
class HostPython:
    path: str
    version: tuple[int, int, int]
    target: HostPlatform
    uid: int
    user: str

    @property
    def text(self) -> str:
        return ".".join(str(p) for p in self.version)


class _Probe(BaseModel):
    model_config = ConfigDict(extra="ignore")
    machine: str = Field(pattern=r"^[A-Za-z0-9_]{1,32}$")
    libc: list[str] = Field(max_length=2)
    venv: bool


class Record(BaseModel):
    """What bootstrap installed in the venv (written there last, read back next time)."""

    model_config = ConfigDict(extra="forbid")
    version: str = Field(pattern=r"^[A-Za-z0-9.+!_-]{1,64}$")
    wheel_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    deps: Deps


def parse_python_version(text: str) -> tuple[int, int, int] | None:
    """``python --version`` output (``Python 3.11.7``) as numbers; None when it is not that."""
    match = _VERSION_RE.match(text.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3] or 0)


def parse_lines(text: str) -> dict[str, str]:
    """``key value`` lines (the probes' output); the first word is the key."""
    found: dict[str, str] = {}
    for line in text[:MAX_OUTPUT].splitlines():
        key, _, value = line.partition(" ")
        if key and key not in found and value.isprintable():
            found[key] = value.strip()
    return found


def parse_probe(text: str, where: str) -> tuple[str, tuple[int, int] | None, bool]:
    """The host Python's own account: CPU, glibc version (None: another C library), venv."""
    try:
        probe = _Probe.model_validate(json.loads(text.strip().splitlines()[-1]))
    except (ValueError, IndexError, ValidationError):
        raise HostPythonError(
            "the host's Python did not answer the probe", where=where, hint=_PYTHON_FIX
        ) from None
    glibc = None
    if len(probe.libc) == 2 and probe.libc[0] == "glibc":
        match = re.fullmatch(r"(\d{1,3})\.(\d{1,4})", probe.libc[1])
        glibc = (int(match[1]), int(match[2])) if match else None
    return probe.machine, glibc, probe.venv


def parse_record(text: str) -> Record | None:
    """The venv's record; None when missing or damaged (then it is installed again)."""
    try:
        return Record.model_validate_json(text.strip()[:4096]) if text.strip() else None
    except ValidationError:
        return None


def parse_inferfleet_version(text: str) -> str | None:
    match = _INFERFLEET_RE.match(text.strip()[:200])
    return match[1] if match else None


def check_python_name(python: str) -> str:
    """``--python``: one interpreter name or path, nothing a shell or ssh would read otherwise."""
    if (
        not python
        or len(python) > 256
        or python.startswith("-")
        or not python.isprintable()
        or any(c.isspace() for c in python)
    ):
        from inferfleet.errors import UsageError

        raise UsageError(
            f"{python[:80]!r} is not an interpreter name or path",
            hint="give a name on the host's PATH (python3.12) or an absolute path",
        )
    return python


def read_python(conn: SshConnector, python: str) -> HostPython:
    """The host's interpreter: present, >= 3.11, with venv; refused with the fix otherwise."""
    where = f"host {conn.name}"
    py = shlex.quote(python)
    done = conn.run(
        f'p=$(command -v {py}) || {{ echo missing; exit 0; }}; echo "path $p"; '
        f'echo "version $("$p" --version 2>&1 | head -c 200)"; '
        'echo "uid $(id -u)"; echo "user $(id -un)"',
        timeout=60,
    )
    facts = parse_lines(done.stdout)
    if "missing" in facts or "path" not in facts:
        raise HostPythonError(
            f"there is no {python} on the host's PATH", where=where, hint=_PYTHON_FIX
        )
    version = parse_python_version(facts.get("version", ""))
    if version is None:
        raise HostPythonError(
            f"{facts['path']} --version answered {facts.get('version', '')[:80]!r}, "
            "not a Python version",
            where=where,
            hint=_PYTHON_FIX,
        )
    if version[:2] < MIN_PYTHON:
        raise HostPythonError(
            f"{facts['path']} is Python {'.'.join(map(str, version))}; inferfleet needs "
            f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer",
            where=where,
            hint=_PYTHON_FIX,
        )
    probe = conn.run(f"{py} -c {shlex.quote(_PROBE)}", timeout=60, check=False)
    machine, glibc, venv = parse_probe(probe.stdout, where)
    if not venv:
        raise HostPythonError(
            f"{facts['path']} has no venv/ensurepip module", where=where, hint=_PYTHON_FIX
        )
    try:
        uid = int(facts.get("uid", ""))
    except ValueError:
        uid = -1
    user = facts.get("user", "")
    return HostPython(facts["path"], version, HostPlatform(version, machine, glibc), uid, user)


@dataclass(frozen=True)
class Installed:
    venv: bool  # VENV/bin/python exists
    version: str | None  # what VENV/bin/inferfleet --version says
    record: Record | None


def read_venv(conn: SshConnector, venv: str) -> Installed:
    v = quote_path(venv.rstrip("/"))
    done = conn.run(
        f"test -x {v}/bin/python && echo venv; "
        f'echo "version $({v}/bin/inferfleet --version 2>/dev/null | head -c 200)"; '
        f'echo "record $(head -c 4096 {v}/{RECORD} 2>/dev/null | tr -d "\\n")"',
        timeout=60,
    )
    facts = parse_lines(done.stdout)
    return Installed(
        "venv" in facts,
        parse_inferfleet_version(facts.get("version", "")),
        parse_record(facts.get("record", "")),
    )


def up_to_date(installed: Installed, wheel: Wheel) -> bool:
    """Whether the venv already runs exactly this wheel (then nothing is installed)."""
    record = installed.record
    return (
        installed.version == wheel.version
        and record is not None
        and record.version == wheel.version
        and record.wheel_sha256 == wheel.sha256
    )


def make_venv(conn: SshConnector, python: HostPython, venv: str) -> None:
    v = quote_path(venv.rstrip("/"))
    command = f'mkdir -p "$(dirname {v})" && {shlex.quote(python.path)} -m venv {v}'
    done = conn.run(command, timeout=300, check=False)
    if done.returncode != 0:
        conn.run(f"rm -rf {v}", timeout=60, check=False)  # ours, just made, incomplete
        raise HostPythonError(
            f"{python.path} could not make the virtual environment {venv}",
            where=f"host {conn.name}",
            hint=_PYTHON_FIX,
            log_tail=_tail(done.stderr or done.stdout),
        )


def index_reachable(conn: SshConnector, venv: str, requirement: str) -> bool:
    """Whether the venv's pip reaches a package index that knows ``requirement``."""
    v = quote_path(venv.rstrip("/"))
    name = re.split(r"[^A-Za-z0-9._-]", requirement, maxsplit=1)[0] or "pip"
    done = conn.run(
        f"{v}/bin/python -m pip index versions {shlex.quote(name)} --retries 0 --timeout 10 "
        "--disable-pip-version-check --no-input",
        timeout=120,
        check=False,
    )
    return done.returncode == 0


def pip_install(
    conn: SshConnector,
    venv: str,
    wheel: str,
    *,
    wheelhouse: str | None,
    reinstall: bool,
) -> None:
    """Install ``wheel`` (a path there) into the venv, dependencies from the index or a folder."""
    v = quote_path(venv.rstrip("/"))
    pip = f"{v}/bin/python -m pip install --disable-pip-version-check --no-input --quiet"
    where = "--no-index --find-links " + shlex.quote(wheelhouse) if wheelhouse else ""
    commands = [f"{pip} {where} {shlex.quote(wheel)}"]
    if reinstall:
        # Same version, other build (a development tree): pip would call it satisfied.
        commands.append(f"{pip} --no-deps --force-reinstall {shlex.quote(wheel)}")
    for command in commands:
        done = conn.run(command, timeout=1800, check=False)
        if done.returncode != 0:
            source = f"the wheelhouse at {wheelhouse}" if wheelhouse else "the host's package index"
            raise BootstrapError(
                f"pip on the host could not install inferfleet (status {done.returncode}) "
                f"from {source}",
                where=f"host {conn.name} ({venv})",
                hint="read pip's last lines below; when the host reaches no index, run again "
                "with --deps wheelhouse (dependencies are downloaded here and copied over)",
                log_tail=_tail(done.stderr or done.stdout),
            )


def write_record(conn: SshConnector, venv: str, record: Record) -> None:
    v = quote_path(venv.rstrip("/"))
    text = shlex.quote(record.model_dump_json())
    conn.run(
        f"printf '%s\\n' {text} > {v}/{RECORD}.part && mv -f {v}/{RECORD}.part {v}/{RECORD}",
        timeout=60,
    )


def _tail(text: str, lines: int = 12) -> str:
    shown = [ln for ln in text.strip().splitlines() if ln.isprintable()]
    return "\n".join(shown[-lines:])
