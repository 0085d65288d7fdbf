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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferfleet.runtimes.base import AdapterError
from inferfleet.runtimes.flags import parse_args
from inferfleet.runtimes.llamacpp import (
    ALIAS,
    CORS_CLOSED,
    CORS_CREDENTIALS,
    CORS_ORIGINS,
    FLAGS,
    HOST,
    MODELS_MAX,
    MODELS_PRESET,
    PORT,
)

SLEEP_IDLE = "sleep-idle-seconds"
LOAD_ON_STARTUP = "load-on-startup"
STOP_TIMEOUT = "stop-timeout"
# What the router decides for each child (server-models.cpp: update_args, unset_reserved_args).
_ROUTER_OWNED = frozenset(f for field in (ALIAS, HOST, PORT) for f in field.spellings)
PRESET_VERSION = "1"
# The router's Hub paths, closed (L-58). ``POST /models {"model": "owner/repo"}``
# downloads any Hub repo and spawns a server on it, and the router also serves every
# GGUF it finds in the Hugging Face cache by its repo name; b11434 has no flag that
# turns either off (``--offline`` does not reach POST /models). So the router is
# given a model endpoint nothing answers (port 1 of its own loopback: only root may
# listen there) and a cache directory that cannot exist (under a file): nothing is
# listed, nothing is fetched. Its members' files are inferfleet's, verified (L-01).
ROUTER_ENV = {
    "MODEL_ENDPOINT": "http://127.0.0.1:1/",
    "HF_ENDPOINT": "http://127.0.0.1:1/",
    "LLAMA_CACHE": "/dev/null/llama.cpp",
    "HF_HUB_CACHE": "/dev/null/huggingface",
}
# What llama.cpp's preset reader (common/preset.cpp, a PEG grammar) takes: a key is
# an identifier; a value ends at a newline, at ';' or '#' (a comment starts there,
# even inside the value) and loses its trailing blanks; there is no quoting.
_INI_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_INI_VALUE_STOPS = frozenset("\n\r\0;#")


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
        if not _INI_KEY.match(key):
            raise AdapterError(
                f"service {member.name!r}: flag {arg.flag!r} cannot be a preset key",
                hint="llama.cpp's preset reader takes keys of letters, digits and _.-",
            )
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
    """The preset INI text: one section per member, named by its alias.

    Every value is checked against the grammar llama.cpp reads: a value it
    would cut short or read as another line is refused, never written (the
    router would open another, unverified file than the one named).
    """
    lines = [
        f"; llama-server router presets of swap group {group}, rendered by inferfleet",
        f"version = {PRESET_VERSION}",
    ]
    for alias, keys in sections.items():
        _safe_section(alias, group)
        lines += ["", f"[{alias}]"]
        for key, value in keys.items():
            _safe_value(value, f"{key} of member {alias!r} of group {group!r}")
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def _safe_value(text: str, what: str) -> None:
    stops = sorted(_INI_VALUE_STOPS.intersection(text))
    if stops or text.strip(" \t") != text or text == "":
        why = (
            f"it holds {', '.join(repr(c) for c in stops)}, where the reader ends the value"
            if stops
            else "the reader drops surrounding blanks and an empty value"
        )
        raise AdapterError(
            f"the preset value {text!r} ({what}) cannot be written to a llama.cpp preset "
            f"file: {why}, and it has no quoting",
            hint="rename the file or value without ';', '#', line breaks or surrounding "
            "blanks (e.g. a#b.gguf -> a-b.gguf)",
        )


def _safe_section(alias: str, group: str) -> None:
    # A section name ends at ']'; '*' names the section every preset inherits.
    if alias == "*" or any(c in alias for c in "[];#=\n\r\0") or alias.strip() != alias:
        raise AdapterError(
            f"alias {alias!r} of a member of group {group!r} cannot name a preset section",
            hint="use letters, digits, -._:/",
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
        *CORS_ORIGINS.emit(CORS_CLOSED),
        *CORS_CREDENTIALS.emit(),
    ]
