"""Scan the fleet file, the fleet repository and rendered artifacts for secret values (L-55).

Secrets live in untracked env files; the fleet file's fields, the committed
repository and every rendered file must not contain any of their values.
:func:`fleet_secrets` walks every field of a parsed fleet for key-looking
values (the ``secret-in-fleet-field`` rule). The file scan looks for

- the literal values of the given env files (``NAME=value`` lines whose name
  reads as a secret, however short: ``API_KEY=abc123``; or every value with
  ``all_values``), and
- token-shaped strings (``hf_…``, ``sk-…``, ``ghp_…``, AWS keys …) anywhere.

Files are read as bytes, so binary files are scanned too (a token in a
compiled artifact is still a leak); findings never print the secret itself,
only a redacted prefix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from inferfleet.bounded import read_bounded_text
from inferfleet.errors import UsageError
from inferfleet.render.envfile import parse_env_text
from inferfleet.render.secrets import credential_in, is_secret_name, redact, secret_in

# Values shorter than this are too likely to occur by chance ("1", "true").
MIN_VALUE_LENGTH = 8
# A value named as a secret is one from this length on; below MIN_VALUE_LENGTH
# it is only found as a whole word (so "abc1" is not found inside "xabc12").
MIN_NAMED_LENGTH = 4
PLACEHOLDERS = frozenset(
    {"none", "null", "true", "false", "empty", "changeme", "change-me", "placeholder",
     "secret", "password", "token", "xxxx", "xxxxxxxx", "redacted", "<secret>"}
)  # fmt: skip
_WORD = re.compile(rb"[A-Za-z0-9_]")
_MAX_FILE = 256 * 1024 * 1024  # larger files are model payloads, not config
_MAX_ENV_FILE = 1024 * 1024  # KEY=value lines


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str  # "value of HF_TOKEN from secrets.env" | "token-shaped string"
    redacted: str


def parse_env_file(path: Path) -> dict[str, str]:
    """Every ``NAME=value`` of an env file (quotes stripped, comments and blanks skipped).

    The format systemd's ``EnvironmentFile=`` and a shell's ``.`` both read.
    """
    hint = (
        "the untracked env file that holds the secrets (e.g. secrets.env, mode 600) "
        "must exist and be readable"
    )
    text = read_bounded_text(path, _MAX_ENV_FILE, what="env file", error=UsageError, hint=hint)
    values, _unreadable = parse_env_text(text)  # lines that are no assignment hold no value
    return values


def read_env_values(path: Path, *, all_values: bool = False) -> dict[str, str]:
    """Secret values of an env file, by name.

    A value whose name says secret (``API_KEY=abc123``) is one however short
    (down to :data:`MIN_NAMED_LENGTH`; placeholders like ``none`` or
    ``changeme`` excepted); any other value counts from
    :data:`MIN_VALUE_LENGTH`, when it is token-shaped or ``all_values``.
    """
    values: dict[str, str] = {}
    for name, value in parse_env_file(path).items():
        if "${" in value or value.lower() in PLACEHOLDERS:
            continue
        named = is_secret_name(name) and len(value) >= MIN_NAMED_LENGTH
        shaped = len(value) >= MIN_VALUE_LENGTH and (all_values or secret_in(value) is not None)
        if named or shaped:
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
                if len(needle) >= MIN_VALUE_LENGTH or _whole_word(data, start, len(needle)):
                    line = data.count(b"\n", 0, start) + 1
                    findings.append(
                        Finding(
                            shown, line, f"value of {name} from {source}", redact(needle.decode())
                        )
                    )
                start = data.find(needle, start + 1)
        for number, line_bytes in enumerate(data.splitlines(), start=1):
            token = secret_in(line_bytes.decode("utf-8", "replace"))
            if token is not None and token.encode() not in needles:
                findings.append(Finding(shown, number, "token-shaped string", redact(token)))
    return findings


def _whole_word(data: bytes, start: int, length: int) -> bool:
    """Whether ``data[start:start+length]`` stands alone (no word character either side)."""
    before = data[start - 1 : start] if start > 0 else b""
    after = data[start + length : start + length + 1]
    return not (_WORD.fullmatch(before) if before else False) and not (
        _WORD.fullmatch(after) if after else False
    )


@dataclass(frozen=True)
class FieldSecret:
    """A key-looking value in a field of the fleet file (never the value itself)."""

    field: str  # dotted path: services.chat.health.path, gateway.keys_env
    redacted: str


def fleet_secrets(model: BaseModel, *, skip: Callable[[str], bool]) -> list[FieldSecret]:
    """Key-looking values in every text field of ``model`` (a parsed fleet), in field order.

    A value is key-looking when it has a token shape or a credential written
    into it (:func:`inferfleet.render.secrets.credential_in`), or when a
    user-chosen key names a secret (``chat_template_kwargs: {api_key: ...}``;
    the schema's own field names, like ``secrets_env``, are not such keys).
    ``skip(path)`` leaves out fields other rules own.
    """
    return list(_walk(model, "", skip))


def _walk(value: object, path: str, skip: Callable[[str], bool]) -> Iterator[FieldSecret]:
    if path and skip(path):
        return
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name), f"{path}.{name}" if path else name, skip)
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}"
            if skip(inner):
                continue
            named = is_secret_name(str(key)) and isinstance(item, str) and _is_value(item)
            if named:
                yield FieldSecret(inner, f"{key}=…")
            else:
                yield from _walk(item, inner, skip)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]", skip)
    elif isinstance(value, str):
        found = credential_in(value)
        if found is not None:
            yield FieldSecret(path, redact(found))


def _is_value(text: str) -> bool:
    """Whether ``text`` is a real value (not empty, a placeholder or a variable reference)."""
    return len(text) >= MIN_NAMED_LENGTH and "${" not in text and text.lower() not in PLACEHOLDERS
