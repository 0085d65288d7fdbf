"""llama-server's router mode: a swap group's presets and the router's argv, as data.

A member's preset section is its single-model argv (:func:`inferfleet.runtimes.llamacpp.argv`,
the one place flags are chosen) written as INI keys: the flag without its
leading dashes, ``= true`` for a flag without a value. llama-server b11434
reads these keys in ``common/preset.cpp`` (a key is any spelling of a flag, a
negated spelling such as ``no-kv-unified = true`` is reversed to
``kv-unified = false`` and rendered back as ``--no-kv-unified``). The router
sets host, port and alias of each child itself (``server-models.cpp``
``update_args``), so those are left out: the section's name is the alias.

Keys only presets know: ``load-on-startup`` (members loaded when the router
starts) and ``stop-timeout``. ``sleep-idle-seconds`` is an ordinary flag the
child takes: it frees the model's memory after that much idleness and the
next request wakes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.runtimes.base import AdapterError
from inferfleet.runtimes.flags import FieldFlag, parse_args
from inferfleet.runtimes.llamacpp import ALIAS, FLAGS, HOST, PORT

MODELS_PRESET = FieldFlag("groups", ("--models-preset",))
MODELS_MAX = FieldFlag("groups.max_loaded", ("--models-max",))
SLEEP_IDLE = "sleep-idle-seconds"
LOAD_ON_STARTUP = "load-on-startup"
STOP_TIMEOUT = "stop-timeout"
# What the router decides for each child (server-models.cpp: update_args, unset_reserved_args).
_ROUTER_OWNED = frozenset(f for field in (ALIAS, HOST, PORT) for f in field.spellings)
PRESET_VERSION = "1"


@dataclass(frozen=True)
class Member:
    """One member of a group as its router sees it."""

    name: str  # the member service
    words: list[str]  # its single-model argv (llamacpp.argv) without the program
    load_on_startup: bool
    sleep_idle_s: int | None  # None: never sleeps
    stop_timeout_s: int


def preset_section(member: Member) -> dict[str, str]:
    """The member's INI keys, in its argv's order."""
    keys: dict[str, str] = {}
    for arg in parse_args(member.words, FLAGS.takes):
        if arg.flag is None:
            raise AdapterError(
                f"service {member.name!r}: {arg.text!r} is not a flag; "
                "a router preset holds flags only",
                hint="remove the positional word from extra_args",
            )
        if arg.flag in _ROUTER_OWNED:
            continue
        key = arg.flag.lstrip("-")
        if key in keys:
            raise AdapterError(
                f"service {member.name!r} passes {arg.flag} twice; a preset "
                "holds one value per flag",
                hint="give the flag once (join the values as the flag expects)",
            )
        keys[key] = "true" if arg.value is None else arg.value
    if member.sleep_idle_s is not None:
        keys[SLEEP_IDLE] = str(member.sleep_idle_s)
    if member.load_on_startup:
        keys[LOAD_ON_STARTUP] = "true"
    keys[STOP_TIMEOUT] = str(member.stop_timeout_s)
    return keys


def render_presets(group: str, sections: Mapping[str, Mapping[str, str]]) -> str:
    """The preset INI text: one section per member, named by its alias."""
    lines = [
        f"; llama-server router presets of swap group {group}, rendered by inferfleet",
        f"version = {PRESET_VERSION}",
    ]
    for alias, keys in sections.items():
        _safe(alias, f"alias of a member of group {group}")
        lines += ["", f"[{alias}]"]
        for key, value in keys.items():
            _safe(value, f"value of {key} for {alias}")
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def _safe(text: str, what: str) -> None:
    # An INI line ends at a newline; a ';' or '#' at the start makes a comment, and
    # brackets in a section name end it early: refuse rather than write another meaning.
    if any(c in text for c in "\n\r\0") or text.strip() != text or text == "":
        raise AdapterError(
            f"{what} {text!r} cannot be written to a preset file",
            hint="use a value without line breaks or surrounding spaces",
        )
    if what.startswith("alias") and any(c in text for c in "[];#="):
        raise AdapterError(
            f"{what} {text!r} cannot name a preset section", hint="use letters, digits, -._:/"
        )


def router_argv(
    program: Sequence[str], listen_host: str, listen_port: int, preset_path: str, max_loaded: int
) -> list[str]:
    """The router's own command line: no model, presets from a file, at most N loaded."""
    return [
        *program,
        *HOST.emit(listen_host),
        *PORT.emit(str(listen_port)),
        *MODELS_PRESET.emit(preset_path),
        *MODELS_MAX.emit(str(max_loaded)),
    ]
