"""Render third-party settings files from env files at deploy time (L-54).

Some services read settings files that do not expand environment variables:
a literal ``${SECRET}`` ran in production for weeks. The template lives in
the repo with ``${NAME}`` placeholders; the values come only from env files
on the host; only allowlisted names may appear; any unresolved placeholder
fails loudly; the result is written with mode 600 outside the repo, and only
when it changed (re-rendering is idempotent).

:func:`render_service_settings` is the one way a service's settings files
are rendered: ``apply`` (and ``up``) render them on the host as part of
applying the service, and ``render-settings`` does the same by hand. This
module only reads and returns text; the deploy and the CLI write it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from inferfleet.bounded import MAX_DECLARED_TEXT, read_bounded_text, read_tree_file
from inferfleet.errors import FleetError
from inferfleet.fleetfile.fleet import Service
from inferfleet.render.envfile import parse_env_text
from inferfleet.render.facts import HostFacts, fleet_relative

# An env file holds KEY=value lines; more than this is not one.
MAX_ENV_BYTES = 1024 * 1024

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What is left of a "${" once the well-formed placeholders are gone: shown up to the
# end of its line (at most 40 characters), never the rest of the file.
_LOOSE = re.compile(r"\$\{[^}\n]{0,40}\}?")


class SettingsError(FleetError, ValueError):
    """A settings template cannot be rendered safely."""


def read_env_files(files: Iterable[Path]) -> dict[str, str]:
    """``KEY=value`` lines (``#`` comments, optional ``export``, matching outer quotes)."""
    values: dict[str, str] = {}
    for path in files:
        hint = "create it from the committed example (it is untracked on purpose)"
        text = read_bounded_text(
            path, MAX_ENV_BYTES, what="env file", error=SettingsError, hint=hint
        )
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


@dataclass(frozen=True)
class RenderedSettings:
    """One settings file of a service, rendered for its host (the content holds secrets)."""

    field: str  # services.NAME.settings[I]
    template: str  # the template's path here
    dest: str  # absolute destination on the host
    content: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()

    def __repr__(self) -> str:  # never the content: it holds the rendered secrets
        return f"RenderedSettings({self.field}, dest={self.dest!r}, sha256={self.sha256[:12]})"


def render_service_settings(
    name: str,
    service: Service,
    facts: HostFacts,
    *,
    env_files: Sequence[Path] | None = None,
    forbidden: Sequence[Path] = (),
) -> list[RenderedSettings]:
    """Every settings file of service ``name``, rendered from its template (L-54).

    Templates and relative env files are found relative to the fleet file's
    folder (``facts.fleet_dir``); ``env_files`` replaces each file's own list.
    A destination must be absolute (or ``~/...``) and outside every folder in
    ``forbidden`` (the checkout): a rendered secret must never be committable.
    Nothing is written here; any problem is a :class:`SettingsError` naming the
    settings entry.
    """
    found: list[RenderedSettings] = []
    for index, spec in enumerate(service.settings):
        where = f"services.{name}.settings[{index}]"
        template_path = Path(fleet_relative(facts, spec.template))
        template = read_tree_file(
            Path(facts.fleet_dir),
            spec.template,
            MAX_DECLARED_TEXT,
            what="settings template",
            error=SettingsError,
            where=f"{where}.template",
            hint="commit the template next to the fleet file (its path is relative to it)",
        )
        files = (
            env_files
            if env_files is not None
            else [Path(fleet_relative(facts, p)) for p in spec.env_files]
        )
        text = render_settings(template, spec.allow, read_env_files(files), where=where)
        dest = facts.expand(spec.dest)
        if not dest.startswith("/"):
            raise SettingsError(
                f"settings destination {spec.dest!r} is not an absolute path",
                where=where,
                hint="write dest as /etc/... or ~/... (it is a path on the host)",
            )
        target = Path(dest).resolve()
        for folder in forbidden:
            root = folder.resolve()
            if target == root or root in target.parents:
                raise SettingsError(
                    f"refusing to render settings inside the checkout {folder}: {dest}",
                    where=where,
                    hint="choose a destination outside the fleet checkout (e.g. under /etc or "
                    "~/.config): rendered settings hold secrets (L-54, L-55)",
                )
        twice = next((f for f in found if f.dest == dest), None)
        if twice is not None:
            raise SettingsError(
                f"settings destination {dest} is also the destination of {twice.field}",
                where=where,
                hint="give each settings file its own dest (one would overwrite the other)",
            )
        found.append(RenderedSettings(where, str(template_path), dest, text))
    return found
