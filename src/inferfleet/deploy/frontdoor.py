"""What the front-door processes share when deployed: key files, digests, keep or restart.

The gateway (:mod:`inferfleet.deploy.gateway`) and the auth proxy
(:mod:`inferfleet.deploy.proxy`) are deployed the same way:

- their keys come from an untracked, mode-600 env file (L-55), read here
  with its checks (:func:`read_private_env`); the values only ever reach the
  process's environment (L-54), and only a digest of them enters the spec
  (:func:`keys_digest`), so a changed key restarts the process;
- a process-backend one whose recorded spec is unchanged and whose own
  process answers its health route is kept; any other is stopped by its
  recorded pid and started again (:func:`keep_or_stop`, L-33, L-43);
- its environment is what the caller passes on, its keys, then its own
  (:func:`process_environment`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from inferfleet.backends.ports import owned_by
from inferfleet.backends.process import ProcessBackend, alive
from inferfleet.backends.records import ServiceRecord
from inferfleet.errors import UsageError
from inferfleet.render.pipeline import passed_from_caller

Note = Callable[[str], None]


def front_record(
    name: str, *, host: str, argv: list[str], bind: str, port: int, spec: str, health_path: str,
    engine: str,
) -> ServiceRecord:  # fmt: skip
    """The record a front-door process (the gateway, the proxy) is filed under before it
    starts: stopped by this pid later, never by name (L-43); pid and times are the backend's."""
    return ServiceRecord(
        service=name,
        host=host,
        pid=0,
        create_time=0.0,
        argv=argv,
        bind=bind,
        port=port,
        log="",
        started_at=0.0,
        spec_hash=spec,
        health_path=health_path,
        alias=name,
        runtime_version=engine,
    )


def read_private_env(
    path: Path, *, error: type[UsageError], where: str, create_hint: str
) -> tuple[str, dict[str, str]]:
    """A key file's text and values: present, readable, and private (no group/other bits)."""
    from inferfleet.checks.secret_scan import parse_env_file

    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise error(
            f"the key file {path} cannot be read: {reason}", where=where, hint=create_hint
        ) from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise error(
            f"the key file {path} is readable by others (mode {stat.S_IMODE(info.st_mode):03o})",
            where=where,
            hint=f"chmod 600 {path}: it holds the keys clients send (L-55)",
        )
    return text, parse_env_file(path)


def keys_digest(values: Mapping[str, str]) -> str:
    """A digest of the keys (a changed key restarts the process); never the keys themselves."""
    text = "\n".join(f"{k}={v}" for k, v in sorted(values.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def process_environment(
    environ: Mapping[str, str] | None, *parts: Mapping[str, str]
) -> dict[str, str]:
    """What the caller passes on (locale, proxies...), then each part in order (keys, own)."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if passed_from_caller(k)}
    for part in parts:
        env.update(part)
    return env


@dataclass(frozen=True)
class Decision:
    kept: ServiceRecord | None  # the running one, when it stays
    action: str  # unchanged | started | restarted
    reason: str = ""


def keep_or_stop(
    backend: ProcessBackend,
    name: str,
    spec: str,
    answers: Callable[[ServiceRecord], bool],
    *,
    grace: float,
) -> Decision:
    """Keep the recorded process when its spec is ``spec`` and its own process answers (L-33);
    otherwise stop it by its recorded pid (L-43) and say how the next start is called."""
    before = backend.records.read(name)
    running = None if before is None else alive(before)
    if (
        before is not None
        and running is not None
        and before.spec_hash == spec
        and answers(before)
        and owned_by(before.port, before.bind, before.pid)
    ):
        return Decision(before, "unchanged", "already running with this spec")
    if before is None:
        return Decision(None, "started")
    stopped = backend.stop(name, grace=grace)
    if stopped.outcome in {"terminated", "killed"}:
        why = "spec changed" if before.spec_hash != spec else "it was not healthy"
        return Decision(None, "restarted", why)
    return Decision(None, "started")
