"""The LLM servers running on a host, read into services (``import host HOST``).

One probe runs on the host over the deploy's connector (ssh, or ``sh`` for
this machine): for each process whose program is ``llama-server``, a Python
running vLLM's or SGLang's server module, or the ``vllm`` console script
(which ``/proc`` shows as its shebang's Python, then the script), its
``/proc/PID/cmdline`` (base64, so any byte survives), the *names* of its
environment (never the values: a token in an environment is not the
import's to copy, L-06), its cgroup (the systemd unit it runs under), and
the TCP ports the host listens on. The model files' sizes are read there
too (a vLLM/SGLang model folder's files, a few levels deep). A second probe
is not needed per process; the parsing is pure.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from inferfleet.fleetfile.fleet import Host
from inferfleet.importers.commandline import identify
from inferfleet.importers.engines import ENGINES
from inferfleet.importers.engines import canonical_flag as engine_flag
from inferfleet.importers.llamacpp import canonical_flag, model_name
from inferfleet.importers.result import Imported, Where
from inferfleet.importers.service import Source, read_service
from inferfleet.runtimes import llamacpp as lc
from inferfleet.runtimes.flags import parse_args
from inferfleet.runtimes.pinned import is_python
from inferfleet.runtimes.registry import traits

MAX_PROBE_CHARS = 4 * 1024 * 1024
MODEL_FOLDER_DEPTH = 4  # how deep a vLLM/SGLang model folder is listed on the host
PROBE = r"""
for d in /proc/[0-9]*; do
  [ -r "$d/cmdline" ] || continue
  first=$(tr '\000' '\n' < "$d/cmdline" 2>/dev/null | head -n 1)
  case "${first##*/}" in
    llama-server|vllm) ;;
    python*)
      case " $(tr '\000' ' ' < "$d/cmdline" 2>/dev/null) " in
        *" -m vllm.entrypoints.openai.api_server "*|*" -m sglang.launch_server "*) ;;
        *"/vllm serve "*) ;;
        *) continue ;;
      esac ;;
    *) continue ;;
  esac
  printf 'pid %s\n' "${d#/proc/}"
  printf 'argv %s\n' "$(base64 -w0 < "$d/cmdline")"
  printf 'env %s\n' "$(tr '\000' '\n' < "$d/environ" 2>/dev/null | cut -d= -f1 | tr '\n' ' ')"
  printf 'cgroup %s\n' "$(tail -n 1 "$d/cgroup" 2>/dev/null)"
done
printf 'listen %s\n' "$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
  awk '$4 == "0A" {n = split($2, a, ":"); print a[n]}' | tr '\n' ' ')"
"""
# Names every login or unit has; the others are listed (their values are never read).
_SESSION_NAMES = frozenset(
    {"PATH", "HOME", "LANG", "TZ", "PWD", "OLDPWD", "SHLVL", "_", "USER", "LOGNAME", "SHELL",
     "TERM", "MAIL", "INVOCATION_ID", "JOURNAL_STREAM", "SYSTEMD_EXEC_PID", "MANAGERPID",
     "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "XDG_RUNTIME_DIR", "XDG_SESSION_ID",
     "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "DBUS_SESSION_BUS_ADDRESS", "MOTD_SHOWN"}
)  # fmt: skip


@dataclass
class Running:
    pid: int
    argv: list[str]
    env_names: list[str] = field(default_factory=list)
    cgroup: str = ""


@dataclass
class Probe:
    processes: list[Running] = field(default_factory=list)
    listening: set[int] = field(default_factory=set)


def parse_probe(text: str) -> Probe:
    """The probe's output as data; a line that does not parse is skipped."""
    probe = Probe()
    current: Running | None = None
    for line in text[:MAX_PROBE_CHARS].splitlines():
        key, _, value = line.partition(" ")
        if key == "pid" and value.isdigit():
            current = Running(int(value), [])
            probe.processes.append(current)
        elif key == "argv" and current is not None:
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                continue
            current.argv = server_argv(raw.decode("utf-8", errors="replace").split("\0")[:-1])
        elif key == "env" and current is not None:
            current.env_names = value.split()
        elif key == "cgroup" and current is not None:
            current.cgroup = value
        elif key == "listen":
            probe.listening = {int(p, 16) for p in value.split() if _hex(p)}
    return probe


def _hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdefABCDEF" for c in text)


def unit_of(cgroup: str) -> tuple[str, str] | None:
    """(unit, scope) of a process's cgroup line when a systemd service runs it."""
    path = cgroup.rsplit(":", 1)[-1]
    parts = [p for p in path.split("/") if p]
    if not parts or not parts[-1].endswith(".service"):
        return None
    scope = "user" if any(p.startswith("user@") for p in parts[:-1]) else "system"
    return parts[-1], scope


def server_argv(argv: list[str]) -> list[str]:
    """The command line as the operator ran it: a console script (``vllm serve``) is shown by
    ``/proc`` as its shebang's Python followed by the script."""
    if len(argv) >= 3 and is_python(argv[0]) and PurePosixPath(argv[1]).name == "vllm":
        return argv[1:]
    return argv


def _args(argv: list[str]) -> tuple[str, list[str], bool]:
    """(kind, parsed flags' words, positional model) of a server's argv."""
    program = identify(argv)
    if program is None:
        return "llama.cpp", argv[1:], False
    return program.kind, program.args, program.program[-1] == "serve"


def _parsed(argv: list[str]) -> tuple[str, list[tuple[str | None, str | None, int]]]:
    """(kind, [(canonical flag or None, value, index)]) with the runtime's own flag table."""
    kind, args, _ = _args(argv)
    table = ENGINES[kind].table if kind in ENGINES else lc.FLAGS
    found = []
    canonical = (lambda f: engine_flag(f, kind)) if kind in ENGINES else canonical_flag
    for arg in parse_args(args, lambda f: table.takes(table.canonical(f))):
        found.append((None if arg.flag is None else canonical(arg.flag), arg.value, arg.index))
    return kind, found


def port_of(argv: list[str]) -> int:
    kind, parsed = _parsed(argv)
    for flag, value, _ in parsed:
        if flag == "--port" and (value or "").isdigit():
            return int(value or "")
    return traits(kind).default_port


def model_dirs(argv: list[str]) -> list[str]:
    """Folders of the GGUF files a llama-server command line loads (their sizes are read on
    the host)."""
    if _args(argv)[0] != "llama.cpp":
        return []
    found = []
    for arg in parse_args(argv[1:], lc.FLAGS.takes):
        if arg.flag in ("-m", "--model", "-mm", "--mmproj") and arg.value:
            folder = str(PurePosixPath(arg.value).parent)
            if folder not in found:
                found.append(folder)
    return found


def model_folder(argv: list[str]) -> str | None:
    """The model folder a vLLM/SGLang command line serves (None: a Hub id, or llama.cpp)."""
    kind, parsed = _parsed(argv)
    if kind not in ENGINES:
        return None
    positional = _args(argv)[2]
    model = None
    for flag, value, index in parsed:
        if (flag is None and positional and index == 0) or flag in ("--model", "--model-path"):
            model = value
    return model if model is not None and model.startswith("/") else None


def sizes_command(folders: Sequence[str], trees: Sequence[str] = ()) -> str:
    """Sizes of the files in ``folders`` and, a few levels deep, in ``trees``."""
    files = [
        f"find {shlex.quote(f)} -maxdepth 1 -type f -printf '%s %p\\n' 2>/dev/null" for f in folders
    ]
    files += [
        f"find {shlex.quote(f)} -maxdepth {MODEL_FOLDER_DEPTH} -type f -printf '%s %p\\n' "
        "2>/dev/null"
        for f in trees
    ]
    return " ; ".join(files)


def parse_sizes(text: str) -> dict[str, int]:
    sizes = {}
    for line in text[:MAX_PROBE_CHARS].splitlines():
        size, _, path = line.partition(" ")
        if size.isdigit() and path:
            sizes[path] = int(size)
    return sizes


def read_host(
    run: Callable[[str], str],
    host_name: str,
    host: Host | None,
    *,
    ports: list[int],
) -> Imported:
    """Every LLM server on the host (those on ``ports`` when given) as a service."""
    out = Imported(host=host_name)
    probe = parse_probe(run(PROBE))
    # A `vllm` that is not `vllm serve` (chat, bench) is a client, not a server.
    servers = [p for p in probe.processes if p.argv and identify(p.argv) is not None]
    chosen = [p for p in servers if not ports or port_of(p.argv) in ports]
    folders = [f for p in chosen for f in model_dirs(p.argv)]
    trees = [t for t in (model_folder(p.argv) for p in chosen) if t is not None]
    sizes = parse_sizes(run(sizes_command(folders, trees))) if folders or trees else {}

    def size_of(path: Path) -> int:
        if str(path) not in sizes:
            raise FileNotFoundError(2, "not found on the host", str(path))
        return sizes[str(path)]

    def files_of(folder: Path) -> list[tuple[str, int]]:
        inside = PurePosixPath(folder)
        found = sorted(
            (PurePosixPath(p).relative_to(inside).as_posix(), size)
            for p, size in sizes.items()
            if inside in PurePosixPath(p).parents
        )
        return [(p, size) for p, size in found if ".cache" not in PurePosixPath(p).parts]

    if not chosen:
        which = f" on port {', '.join(map(str, ports))}" if ports else ""
        out.problem(
            Where(host_name),
            f"no llama-server, vLLM or SGLang server runs on host {host_name!r}{which}",
            "start it there, or name the port it listens on with --port",
        )
        return out
    for proc in chosen:
        _one(proc, probe, host_name, host, size_of, files_of, out)
    return out


def _one(
    proc: Running,
    probe: Probe,
    host_name: str,
    host: Host | None,
    size_of: Callable[[Path], int],
    files_of: Callable[[Path], list[tuple[str, int]]],
    out: Imported,
) -> None:
    where = Where(f"{host_name} pid {proc.pid}")
    port = port_of(proc.argv)
    unit = unit_of(proc.cgroup)
    alias = alias_of(proc.argv)
    if alias is not None:
        name = model_name(alias)
    elif unit is not None:
        name = model_name(unit[0].removesuffix(".service").removeprefix("inferfleet-"))
    else:
        kind = _args(proc.argv)[0]
        name = f"{'llama-server' if kind == 'llama.cpp' else kind}-{port}"
    if port not in probe.listening:
        out.note(where, f"{name}: nothing listens on port {port} (still loading, or stopped)")
    for env in proc.env_names:
        if env not in _SESSION_NAMES and not env.startswith(("LC_", "SSH_")):
            out.note(
                where,
                f"{name}: the process has {env} in its environment (value not read): declare "
                "it in env, runtime_env or the secrets_env file",
            )
    # The binary is on the host, not here: its pins come from `runtime pin` there.
    source = Source(name, proc.argv, where, size_of=size_of, files_of=files_of, local=False)
    service = read_service(out, source, host_name=host_name, host=host)
    if service is None:
        return
    if unit is not None:
        service.block["backend"] = "systemd"
        if unit[1] == "user":
            service.block["unit"] = {"scope": "user"}
        out.note(
            where,
            f"{name}: runs under {unit[1]} unit {unit[0]}: `inferfleet import systemd` of its "
            "unit file brings its user, restart and environment settings",
        )
    out.services[name] = service


def alias_of(argv: list[str]) -> str | None:
    for flag, value, _ in _parsed(argv)[1]:
        if flag in ("--alias", "--served-model-name") and value:
            return value
    return None
