"""Scan the fleet repository and rendered artifacts for secret values (L-55).

Secrets live in untracked env files; the committed repository and every
rendered file must not contain any of their values. The scan looks for

- the literal values of the given env files (``NAME=value`` lines whose name
  reads as a secret, or every value with ``all_values``), and
- token-shaped strings (``hf_…``, ``sk-…``, ``ghp_…``, AWS keys …) anywhere.

Files are read as bytes, so binary files are scanned too (a token in a
compiled artifact is still a leak); findings never print the secret itself,
only a redacted prefix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from inferfleet.errors import UsageError
from inferfleet.render.secrets import is_secret_name, redact, secret_in

# Values shorter than this are too likely to occur by chance ("1", "true").
MIN_VALUE_LENGTH = 8
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_MAX_FILE = 256 * 1024 * 1024  # larger files are model payloads, not config


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str  # "value of HF_TOKEN from secrets.env" | "token-shaped string"
    redacted: str


def read_env_values(path: Path, *, all_values: bool = False) -> dict[str, str]:
    """Secret values of an env file, by name (quotes stripped, comments skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot read env file {path}: {exc.strerror}",
            hint="pass the untracked env file that holds the secrets (e.g. secrets.env)",
        ) from None
    values: dict[str, str] = {}
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        match = _ENV_LINE.match(raw)
        if not match:
            continue
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if len(value) < MIN_VALUE_LENGTH:
            continue
        if all_values or is_secret_name(name) or secret_in(value) is not None:
            values[name] = value
    return values


def walk(folder: Path) -> list[Path]:
    """Every regular file under a rendered output folder."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def scan(
    files: Iterable[Path],
    secrets: dict[str, tuple[str, str]],
    *,
    root: Path | None = None,
) -> list[Finding]:
    """Findings in ``files``; ``secrets`` maps value -> (name, source file name)."""
    needles = {value.encode(): meta for value, meta in secrets.items()}
    findings: list[Finding] = []
    for path in files:
        try:
            if path.stat().st_size > _MAX_FILE:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        shown = os.path.relpath(path, root) if root is not None else str(path)
        for needle, (name, source) in needles.items():
            start = data.find(needle)
            while start != -1:
                line = data.count(b"\n", 0, start) + 1
                findings.append(
                    Finding(shown, line, f"value of {name} from {source}", redact(needle.decode()))
                )
                start = data.find(needle, start + 1)
        for number, line_bytes in enumerate(data.splitlines(), start=1):
            token = secret_in(line_bytes.decode("utf-8", "replace"))
            if token is not None and token.encode() not in needles:
                findings.append(Finding(shown, number, "token-shaped string", redact(token)))
    return findings
