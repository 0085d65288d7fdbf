"""A command line as another tool writes it: split into words, refused when it needs a shell.

llama-swap runs ``cmd`` without a shell: it drops lines starting with ``#``,
joins lines ending in ``\\``, and splits the rest like a POSIX shell would
(quotes, backslashes, ``#`` comments) but never interprets pipes, ``&&``,
redirections or ``$(...)``. Such a construct in a ``cmd`` reaches the server
as literal words, so it was never doing what it says: the import refuses it
with its line rather than guessing.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from inferfleet.errors import UsageError
from inferfleet.runtimes.pinned import BINARY_ENTRY, is_python

MAX_COMMAND_CHARS = 64 * 1024
# What only a shell gives meaning to, outside quotes (inside double quotes: $( and `).
_OPERATORS = ("&&", "||", "|", ";", "&", ">", "<", "`", "$(")
_IN_DOUBLE_QUOTES = ("`", "$(")


@dataclass(frozen=True)
class ShellConstruct:
    line: int  # 0-based line of the command text
    construct: str


def shell_construct(text: str) -> ShellConstruct | None:
    """The first shell-only construct in ``text``, quote-aware, or None."""
    quote = ""
    line = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            line += 1
            quote = "" if quote == "#" else quote
        elif quote == "#":
            pass
        elif ch == "\\" and quote != "'":
            i += 2
            continue
        elif quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch == '"':
                quote = ""
            elif text.startswith(_IN_DOUBLE_QUOTES, i):
                return ShellConstruct(line, "$(" if ch == "$" else "`")
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            quote = "#"
        else:
            for op in _OPERATORS:
                if text.startswith(op, i):
                    return ShellConstruct(line, op)
        i += 1
    return None


def split_command(text: str) -> list[str]:
    """llama-swap's SanitizeCommand: comment lines out, ``\\`` continuations joined, split."""
    if len(text) > MAX_COMMAND_CHARS:
        raise UsageError(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    lines = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        lines.append(stripped[:-1] + " " if stripped.endswith("\\") else line)
    try:
        return shlex.split("\n".join(lines), comments=True, posix=True)
    except ValueError as exc:  # "No closing quotation"
        raise UsageError(f"the command cannot be split into words: {exc}") from None


@dataclass(frozen=True)
class Program:
    """Which server a command line starts, and where its flags begin."""

    kind: str  # llama.cpp | vllm | sglang
    program: list[str]  # the words that start it (binary, or python -m module)
    args: list[str]


# The server modules a Python interpreter runs (`python -m MODULE`), as the adapters render them.
_PYTHON_MODULES = {python[-1]: kind for kind, (python, _) in BINARY_ENTRY.items()}


def identify(words: list[str]) -> Program | None:
    """The runtime a command line starts, or None when it is none inferfleet serves with."""
    if not words:
        return None
    name = os.path.basename(words[0])
    if name == "llama-server":
        return Program("llama.cpp", words[:1], words[1:])
    if name == "vllm" and words[1:2] == list(BINARY_ENTRY["vllm"][1]):
        return Program("vllm", words[:2], words[2:])
    if is_python(words[0]) and len(words) >= 3 and words[1] == "-m":
        kind = _PYTHON_MODULES.get(words[2])
        if kind is not None:
            return Program(kind, words[:3], words[3:])
    return None
