"""systemd unit files as data: sections of (key, value) lines, written byte-stable.

Both systemd units and Quadlet ``.container`` files use this syntax. Command
lines are quoted here, once, the way systemd parses them (systemd.syntax and
systemd.service "Command lines"): words split on whitespace, double quotes
with C escapes, ``%`` specifiers doubled, ``$`` doubled so no variable is
expanded behind our back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from inferfleet.errors import UsageError
from inferfleet.text import unsafe_char

HEADER = "# Rendered by inferfleet from the fleet file; edit the fleet, not this file."
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


class UnitFileError(UsageError):
    """A value cannot be written into a unit file so that systemd reads it back."""


@dataclass
class UnitFile:
    """An ordered set of sections; a key may repeat (``Environment=``, ``Volume=``)."""

    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    comment: str = HEADER

    def add(self, section: str, key: str, value: str | int | float | bool) -> UnitFile:
        self.sections.setdefault(section, []).append((key, _value(value)))
        return self

    def extend(self, section: str, key: str, values: Iterable[str]) -> UnitFile:
        for value in values:
            self.add(section, key, value)
        return self

    def get(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def text(self) -> str:
        blocks = [self.comment] if self.comment else []
        for name, lines in self.sections.items():
            body = "\n".join(f"{key}={value}" for key, value in lines)
            blocks.append(f"[{name}]\n{body}")
        return "\n\n".join(blocks) + "\n"


def _value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    # The schema refuses these in fleet values; this guards values built in code. A CR,
    # NUL or vertical tab ends a line for some readers of unit files, not only LF.
    found = unsafe_char(text)
    if found is not None:
        raise UnitFileError(
            f"a unit file value cannot carry {found[1]}: {text!r}",
            hint="remove the control character from the fleet value",
        )
    # systemd joins a line ending in a backslash with the next one: the next key
    # (a User=, an EnvironmentFile=) would silently become part of this value.
    if text.endswith("\\"):
        raise UnitFileError(
            f"a unit file value cannot end in a backslash: {text!r}",
            hint="remove the trailing backslash from the fleet value (systemd would read "
            "the next line as part of it)",
        )
    # systemd expands %-specifiers in nearly every key (Exec*, Environment, User,
    # paths, descriptions; Quadlet passes them through): a value reaches it as
    # written only with each % doubled, which the renderers do; one left single is
    # refused here rather than expanded on the host (%h, %u, %H ...).
    if "%" in text.replace("%%", ""):
        raise UnitFileError(
            f"a unit file value has an unescaped % (systemd would expand it as a specifier): "
            f"{text!r}",
            hint="renderers pass such values through escape_value or command_line",
        )
    return text


def quote_word(word: str) -> str:
    """One argv word as systemd reads it back exactly."""
    if word and _SAFE_WORD.match(word):
        return word
    inner = "".join(_ESCAPES.get(ch, ch) for ch in word)
    return f'"{_specifiers(inner)}"'


def _specifiers(text: str) -> str:
    return text.replace("%", "%%").replace("$", "$$")


def command_line(argv: Sequence[str]) -> str:
    """``ExecStart=`` value for an argv list."""
    if not argv:
        raise UnitFileError("an empty command line")
    if any(word == "" for word in argv):
        # Quadlet's parser drops every word after an empty one: the server would
        # start with half its flags and no error.
        raise UnitFileError(
            f"an empty argument in {' '.join(argv[:3])} ...",
            hint="remove the empty string from extra_args (or give the flag a value)",
        )
    return " ".join(quote_word(word) for word in argv)


def escape_value(text: str) -> str:
    """A plain value (a path, a description) with specifiers made literal."""
    return text.replace("%", "%%")


def split_command(text: str) -> list[str]:
    """Parse a command line the way systemd does (the inverse of :func:`command_line`).

    Used to read back what Quadlet generated in tests and in ``diff``.
    """
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        word: list[str] = []
        quote = ""
        while i < n and (quote or text[i] not in " \t"):
            ch = text[i]
            if quote and ch == quote:
                quote = ""
            elif not quote and ch in "\"'":
                quote = ch
            elif ch == "\\" and i + 1 < n:
                i += 1
                word.append({"n": "\n", "t": "\t", "r": "\r"}.get(text[i], text[i]))
            elif ch in "%$" and i + 1 < n and text[i + 1] == ch:
                i += 1
                word.append(ch)
            else:
                word.append(ch)
            i += 1
        words.append("".join(word))
    return words
