"""Command-line flags as data: the ones the fleet owns, and a parser for the rest.

Each adapter declares the flags it emits from a service field as
:class:`FieldFlag` constants next to the code that emits them, and collects
them in its :class:`FlagTable` (``TRAITS.flags``). ``extra_args`` are parsed
here, once, for everyone: the render refusal and the check rules ask
:func:`field_overrides` which words override a field, the rules that read a
flag back (metrics, jinja, micro-batch) use :func:`parse_args`, and
:func:`unknown_flags` compares the rest with the flag list the pinned
runtime's own ``--help`` prints (read by :mod:`inferfleet.install.runtime_flags`,
parsed by :func:`parse_help`).

Pure: text and word lists in, data out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inferfleet.fleetfile.fleet import Runtime

# A flag spelling: one or two dashes, then a letter or digit (never a negative number).
_FLAG = re.compile(r"-{1,2}[A-Za-z0-9][\w.+-]*")
_NUMBER = re.compile(r"-\d+(\.\d+)?([eE][+-]?\d+)?$")
# argparse prints a value-taking alias as "--a VALUE, --b VALUE".
_ARGPARSE_VALUE = re.compile(r" ([A-Z][A-Z0-9_]*|\{[^}]*\}|\[[^\]]*\]|<[^>]*>),\s*(?=-)")
_TWO_VALUES = re.compile(r"[A-Z][A-Z0-9_]* [A-Z][A-Z0-9_]*(\s{2,}|$)")
_SEPARATOR = re.compile(r",\s*(?=-)")
# Flag lines start at the margin (llama.cpp) or two columns in (argparse);
# description lines are indented much further.
_FLAG_LINE_INDENT = 4
MAX_HELP_CHARS = 4_000_000


@dataclass(frozen=True)
class FieldFlag:
    """A flag an adapter emits from a service field; in ``extra_args`` it is refused.

    ``spellings[0]`` is the one the adapter writes; the others are the
    runtime's aliases (short forms, deprecated names) that set the same thing.
    """

    field: str  # the service field, dotted: "ctx_per_slot", "kv_cache.k"
    spellings: tuple[str, ...]
    takes_value: bool = True

    @property
    def flag(self) -> str:
        return self.spellings[0]

    def emit(self, value: str | None = None) -> list[str]:
        """The argv words for this flag: ``[flag]`` or ``[flag, value]``."""
        if self.takes_value != (value is not None):
            raise ValueError(f"{self.flag} takes {'a' if self.takes_value else 'no'} value")
        return [self.flag] if value is None else [self.flag, value]


@dataclass(frozen=True)
class FlagTable:
    """One runtime's field flags and how its parser reads a command line."""

    program: str  # what the runtime is called in messages: "llama-server"
    fields: tuple[FieldFlag, ...]
    inline_values: bool  # takes --flag=value (argparse does; llama-server does not)
    underscores: bool = False  # --max_model_len is --max-model-len (vLLM)
    _by_spelling: dict[str, FieldFlag] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        found: dict[str, FieldFlag] = {}
        for item in self.fields:
            for spelling in item.spellings:
                if spelling in found and found[spelling] != item:
                    raise ValueError(f"{spelling} is declared for two fields")
                found[self.canonical(spelling)] = item
        object.__setattr__(self, "_by_spelling", found)

    def canonical(self, flag: str) -> str:
        if self.underscores and flag.startswith("--"):
            return flag.replace("_", "-")
        return flag

    def of(self, field: str) -> FieldFlag:
        """The one flag this runtime sets service field ``field`` with."""
        (found,) = (item for item in self.fields if item.field == field)
        return found

    def field_of(self, flag: str) -> FieldFlag | None:
        return self._by_spelling.get(self.canonical(flag))

    def takes(self, flag: str) -> int | None:
        """How many values a field flag takes, or None when it is not one."""
        item = self.field_of(flag)
        return None if item is None else int(item.takes_value)


@dataclass(frozen=True)
class Arg:
    """One flag (with its value) or one positional word of a command line."""

    index: int  # position of the flag's (or positional's) word
    flag: str | None  # as written, without "=value"; None for a positional
    value: str | None  # inline (--flag=value) or the following word(s), joined by a space
    inline: bool = False
    text: str = ""  # the word as written


def is_flag_word(word: str) -> bool:
    return bool(_FLAG.match(word)) and not _NUMBER.match(word)


Takes = Callable[[str], int | None]


def parse_args(words: Sequence[str], takes: Takes | None = None) -> list[Arg]:
    """Split an argv into flags with their values and positionals.

    ``takes(flag)`` says how many values a flag takes (from a flag table or
    the runtime's own list); when it does not know (None) a flag takes the
    next word as its value unless that word is a flag itself.
    """
    args: list[Arg] = []
    i = 0
    while i < len(words):
        word = words[i]
        if not is_flag_word(word):
            args.append(Arg(i, None, word, text=word))
            i += 1
            continue
        name, eq, inline = word.partition("=")
        if eq:
            args.append(Arg(i, name, inline, inline=True, text=word))
            i += 1
            continue
        count = takes(name) if takes is not None else None
        if count is None:
            nxt = words[i + 1] if i + 1 < len(words) else None
            count = 1 if nxt is not None and not is_flag_word(nxt) else 0
        values = list(words[i + 1 : i + 1 + count])
        args.append(Arg(i, name, " ".join(values) if values else None, text=word))
        i += 1 + len(values)
    return args


def flags_in(args: Iterable[Arg]) -> list[Arg]:
    return [a for a in args if a.flag is not None]


def last_value(args: Iterable[Arg], spellings: Iterable[str]) -> Arg | None:
    """The last of ``spellings`` on the command line (the server keeps the last one)."""
    names = set(spellings)
    found = None
    for arg in args:
        if arg.flag in names:
            found = arg
    return found


@dataclass(frozen=True)
class FieldOverride:
    """A word of ``extra_args`` that sets what a service field owns."""

    index: int
    written: str  # the word as written ("-c", "--ctx-size=4096")
    flag: str  # without any "=value"
    field: str  # the service field to use instead

    def hint(self, service: str) -> str:
        return f"use `services.{service}.{self.field}` (remove {self.flag} from extra_args)"


def field_overrides(table: FlagTable, extra_args: Sequence[str]) -> list[FieldOverride]:
    """The words of ``extra_args`` that set a flag the adapter emits from a field.

    The one detector behind the render refusal and the check rule: a field
    flag in ``extra_args`` would silently win over (or fight with) the value
    inferfleet renders from the fleet, and bypass every rule about it.
    """
    found = []
    for arg in flags_in(parse_args(extra_args, table.takes)):
        assert arg.flag is not None
        item = table.field_of(arg.flag)
        if item is not None:
            found.append(FieldOverride(arg.index, arg.text, arg.flag, item.field))
    return found


# ---------------------------------------------------------------- a runtime's own flags


@dataclass(frozen=True)
class FlagList:
    """The flags a runtime binary accepts, read from its ``--help``."""

    program: str  # what printed it (a path, or "vllm serve")
    flags: Mapping[str, int]  # spelling -> how many values it takes (0, 1, 2)

    def takes(self, flag: str) -> int | None:
        return self.flags.get(flag)

    def suggest(self, flag: str) -> list[str]:
        """The closest known spellings: "misspelt? did you mean …"."""
        return difflib.get_close_matches(flag, list(self.flags), n=3, cutoff=0.7)

    def to_json(self) -> dict[str, object]:
        return {"program": self.program, "flags": dict(sorted(self.flags.items()))}

    @classmethod
    def from_json(cls, data: object) -> FlagList | None:
        """A cached list, or None when the data is not one (a damaged cache is ignored)."""
        if not isinstance(data, dict):
            return None
        program, flags = data.get("program"), data.get("flags")
        if not isinstance(program, str) or not isinstance(flags, dict) or not flags:
            return None
        clean: dict[str, int] = {}
        for name, count in flags.items():
            valid_count = isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= 2
            if not (isinstance(name, str) and is_flag_word(name) and valid_count):
                return None
            clean[name] = count
        return cls(program, clean)


def parse_help(text: str, program: str) -> FlagList:
    """The flags a ``--help`` text lists, with how many values each takes.

    Reads both layouts: llama.cpp's (``-c,    --ctx-size N``, flags at the
    margin, descriptions in a column) and argparse's (``  --max-model-len
    MAX_MODEL_LEN, --max_model_len MAX_MODEL_LEN``).
    """
    flags: dict[str, int] = {}
    for line in text[:MAX_HELP_CHARS].splitlines():
        stripped = line.lstrip()
        if len(line) - len(stripped) > _FLAG_LINE_INDENT:
            continue
        names, count = _line_flags(stripped)
        for name in names:
            flags.setdefault(name, count)
    return FlagList(program, flags)


def _line_flags(rest: str) -> tuple[list[str], int]:
    names: list[str] = []
    count = 0
    while (match := _FLAG.match(rest)) is not None and not _NUMBER.match(match.group(0)):
        names.append(match.group(0))
        rest = rest[match.end() :]
        if (sep := _SEPARATOR.match(rest)) is not None:
            rest = rest[sep.end() :]
            continue
        if (value := _ARGPARSE_VALUE.match(rest)) is not None:
            count = 1
            rest = rest[value.end() :]
            continue
        break
    if not names:
        return [], 0
    if rest.startswith("=") or (rest.startswith(" ") and not rest.startswith("  ")):
        count = 2 if _TWO_VALUES.match(rest.lstrip(" =")) else 1
    return names, count


@dataclass(frozen=True)
class UnknownFlag:
    index: int
    written: str
    flag: str
    problem: str  # what is wrong, in words
    fix: str


def unknown_flags(
    table: FlagTable, known: FlagList, extra_args: Sequence[str]
) -> list[UnknownFlag]:
    """Words of ``extra_args`` the runtime would refuse at start (and crash-loop on)."""
    found: list[UnknownFlag] = []

    def takes(flag: str) -> int | None:
        count = known.takes(flag)
        return known.takes(table.canonical(flag)) if count is None else count

    for arg in flags_in(parse_args(extra_args, takes)):
        assert arg.flag is not None
        name = arg.flag
        if takes(name) is None:
            guesses = known.suggest(table.canonical(name))
            fix = (
                f"misspelt? did you mean {' or '.join(guesses)}"
                if guesses
                else f"see `{known.program} --help` for the flags this build takes"
            )
            problem = f"is not a flag of {known.program}"
            found.append(UnknownFlag(arg.index, arg.text, name, problem, fix))
        elif arg.inline and not table.inline_values:
            found.append(
                UnknownFlag(
                    arg.index,
                    arg.text,
                    name,
                    f"is written as one word; {table.program} does not split --flag=value",
                    f"write it as two words: {name}, {arg.value}",
                )
            )
    return found


# (runtime name, runtime) -> the runtime's own flag list, or why it cannot be
# read here; install/runtime_flags.py reads it (an effect), checks use it.
FlagSource = Callable[[str, "Runtime"], "FlagList | str"]
