"""The operational lessons (L-01 ...) inferfleet encodes, as its users read them.

The texts live in ``lessons.yaml`` next to this module (shipped in the wheel)
and are parsed on first use: for each lesson its kind (check, gate, default,
probe, bench), a one-line title, what happened, why, and what inferfleet does
about it. ``inferfleet explain`` prints them; the rules of ``check`` that
encode a lesson come from the rule catalogue, not from here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal, cast, get_args

import yaml

from inferfleet.errors import UsageError

Kind = Literal["check", "gate", "default", "probe", "bench"]
KINDS: tuple[str, ...] = get_args(Kind)
FIELDS = ("kind", "title", "happened", "why", "does")
LESSON_ID = re.compile(r"L-\d\d")
# What a user may type for a lesson: L-25, l-25, L25, l25.
_TYPED_ID = re.compile(r"[Ll]-?(\d{1,2})")


@dataclass(frozen=True)
class Lesson:
    id: str  # L-25
    kind: Kind
    title: str
    happened: str
    why: str
    does: str


@cache
def lessons() -> dict[str, Lesson]:
    """Every lesson by id, in id order, parsed from the packaged ``lessons.yaml``.

    The file ships with the package, so a malformed one is a bug of this
    release: ValueError naming the entry.
    """
    text = resources.files(__name__).joinpath("lessons.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("lessons.yaml: expected a mapping of lesson ids")
    found: dict[str, Lesson] = {}
    for key, entry in data.items():
        if not isinstance(key, str) or not LESSON_ID.fullmatch(key):
            raise ValueError(f"lessons.yaml: {key!r} is not a lesson id (L-01 ...)")
        if not isinstance(entry, dict) or sorted(entry) != sorted(FIELDS):
            raise ValueError(f"lessons.yaml: {key} must have exactly {', '.join(FIELDS)}")
        values = {name: entry[name] for name in FIELDS}
        for name, value in values.items():
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"lessons.yaml: {key}.{name} must be non-empty text")
        if values["kind"] not in KINDS:
            raise ValueError(f"lessons.yaml: {key}.kind must be one of {', '.join(KINDS)}")
        found[key] = Lesson(
            id=key,
            kind=cast(Kind, values["kind"]),
            title=values["title"].strip(),
            happened=values["happened"].strip(),
            why=values["why"].strip(),
            does=values["does"].strip(),
        )
    return dict(sorted(found.items()))


def lesson_id(text: str) -> str | None:
    """``text`` as a lesson id (``l25`` -> ``L-25``), or None when it does not look like one."""
    typed = _TYPED_ID.fullmatch(text.strip())
    return None if typed is None else f"L-{int(typed.group(1)):02d}"


def lesson(text: str) -> Lesson:
    """The lesson ``text`` names; UsageError with the closest ids when there is none."""
    key = lesson_id(text)
    known = lessons()
    if key is not None and key in known:
        return known[key]
    raise unknown(text, list(known))


def unknown(text: str, candidates: list[str]) -> UsageError:
    """The error for an id that names no lesson or rule, with the closest of ``candidates``."""
    shown = text[:80]  # repr below escapes control characters
    close = difflib.get_close_matches(text.strip(), candidates, n=3, cutoff=0.6)
    ids = lessons()
    first, last = next(iter(ids)), next(reversed(ids))
    hint = f"did you mean {', '.join(close)}? " if close else ""
    hint += f"lessons are {first} to {last}; `inferfleet check --list` lists every rule"
    return UsageError(f"no lesson or rule named {shown!r}", hint=hint)
