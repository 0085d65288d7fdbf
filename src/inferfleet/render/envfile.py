"""The env file of a service's tunables, read by systemd and by podman alike.

systemd's ``EnvironmentFile=`` parses quotes and escapes; podman's
``--env-file`` takes the rest of the line literally. One file serves both, so
values are written bare and anything the two would read differently is
refused instead of silently changed. No secrets (L-55) and no names a runtime
reads by itself (L-24).
"""

from __future__ import annotations

import re

from inferfleet.errors import UsageError
from inferfleet.fleetfile.base import env_value_problem
from inferfleet.fleetfile.fleet import Service
from inferfleet.render.secrets import is_secret_name, runtime_owned, secret_in
from inferfleet.text import unsafe_char


class EnvFileError(UsageError):
    """A tunable cannot go into an env file as it is."""


def env_file(name: str, service: Service) -> str:
    """``KEY=value`` lines: the tunables, then the runtime's own variables."""
    lines = [
        f"# {name}: tunables rendered by inferfleet; secrets live in an untracked file (L-55)."
    ]
    for key, value in sorted(service.env.items()):
        reason = runtime_owned(key)
        if reason is not None:
            raise EnvFileError(
                f"service {name!r}: tunable {key} cannot go into the env file: {reason} (L-24)",
                hint="rename the tunable (e.g. SAMPLING_TEMP), or move it to runtime_env if "
                "the runtime is meant to read it",
            )
        lines.append(_line(name, key, value))
    for key, value in sorted(service.runtime_env.items()):
        lines.append(_line(name, key, value))
    return "\n".join(lines) + "\n"


def _line(service: str, key: str, value: str) -> str:
    if is_secret_name(key) or secret_in(value) is not None:
        raise EnvFileError(
            f"service {service!r}: {key} looks like a secret and would be written in clear (L-55)",
            hint="put it in the untracked file named by secrets_env (mode 600) instead",
        )
    # The schema refuses these already; a Service built in code must not slip through.
    problem = env_value_problem(value)
    if problem is None and unsafe_char(value) is not None:
        problem = "the value has a control character"
    if problem is not None:
        raise EnvFileError(
            f"service {service!r}: {key}: {problem}",
            hint="use a plain value; pass structured settings with a settings file",
        )
    return f"{key}={value}"


# One `NAME=value` line of an env file, as systemd's EnvironmentFile= and a shell's
# `.` both read it: optional `export`, spaces around `=`, matching outer quotes.
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def parse_env_text(text: str) -> tuple[dict[str, str], list[int]]:
    """The values of an env file, and the numbers of its lines that are not
    ``NAME=value``, a ``#`` comment or blank (callers decide whether that is an error)."""
    values: dict[str, str] = {}
    bad: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _ENV_LINE.match(raw)
        if match is None:
            bad.append(number)
            continue
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values, bad
