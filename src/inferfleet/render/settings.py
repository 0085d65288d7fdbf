"""Render third-party settings files from env files at deploy time (L-54).

Some services read settings files that do not expand environment variables:
a literal ``${SECRET}`` ran in production for weeks. The template lives in
the repo with ``${NAME}`` placeholders; the values come only from env files
on the host; only allowlisted names may appear; any unresolved placeholder
fails loudly; the result is written with mode 600 outside the repo, and only
when it changed (re-rendering is idempotent).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from inferfleet.errors import FleetError
from inferfleet.render.envfile import parse_env_text

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LOOSE = re.compile(r"\$\{[^}]*\}?")


class SettingsError(FleetError, ValueError):
    """A settings template cannot be rendered safely."""


def read_env_files(files: Iterable[Path]) -> dict[str, str]:
    """``KEY=value`` lines (``#`` comments, optional ``export``, matching outer quotes)."""
    values: dict[str, str] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(
                f"cannot read env file: {exc.strerror}",
                where=str(path),
                hint="create it from the committed example (it is untracked on purpose)",
            ) from None
        found, bad = parse_env_text(text)
        if bad:
            raise SettingsError("env file line is not KEY=value", where=f"{path}:{bad[0]}", hint="")
        values.update(found)
    return values


def render_settings(
    template: str, allow: Iterable[str], values: Mapping[str, str], *, where: str
) -> str:
    """Substitute ``${NAME}`` from ``values``; every name must be allowlisted and set."""
    allowed = set(allow)
    names = set(PLACEHOLDER.findall(template))
    # Allowlist first (L-54: only names meant to be rendered), then presence.
    for bad, what, hint in (
        (
            names - allowed,
            "placeholder(s) {} are not in the allowlist",
            "add the name to the settings file's allow list if it is meant to be there",
        ),
        (
            names - set(values),
            "unresolved placeholder(s): {}",
            "set them in one of the settings file's env_files on the host",
        ),
    ):
        if bad:
            raise SettingsError(what.format(", ".join(sorted(bad))), where=where, hint=hint)
    broken = [m.group(0) for m in _LOOSE.finditer(PLACEHOLDER.sub("", template))]
    if broken:
        raise SettingsError(
            f"malformed placeholder {broken[0]!r}",
            where=where,
            hint="write placeholders as ${NAME} (letters, digits, underscore)",
        )
    # One pass over the template: a value that itself contains ${X} stays literal.
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
