"""One output object for every command: human (rich), ``--json`` or quiet.

JSON documents are versioned: every one carries ``"schema":
"inferfleet.<what>/v<N>"`` so scripts can check what they parse; their
types and JSON Schemas are in :mod:`inferfleet.documents`. Names that
come from files or servers are escaped before rich sees them, so a model
called ``[bold]x`` prints as itself.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

# rich loads on the first human line, table or note: a `--json` run or the
# event stream of a remote `apply` prints JSON only and does not pay for it.
if TYPE_CHECKING:
    from rich.console import Console


def esc(value: object) -> str:
    """Escape any text from a file or a server for rich markup."""
    from rich.markup import escape

    return escape(str(value))


# C0/C1 controls (terminal escapes, a forged line break), bidi overrides and line separators.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(value: object) -> str:
    """Text from a file or the network with every control character shown as an
    escape (``\\x1b``, ``\\u202e``): a value cannot move the cursor, recolour the
    terminal or start a forged log line. Not escaped for rich: pass it to :func:`esc`."""

    def _escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNPRINTABLE.sub(_escape, str(value))


def _width(stream: object) -> int | None:
    """Terminal width on a terminal; wide when piped, so logs keep one row a line."""
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        return None
    return int(os.environ.get("COLUMNS", "200"))


# A table row's frame: the box's edge spaces and three characters between columns
# (SIMPLE_HEAD, padding 1, no edge padding).
_EDGE = 2
_BETWEEN = 3


@dataclass(frozen=True)
class Col:
    """A table column and how it gives way on a narrow terminal.

    ``drop``: 0 keeps it at any width; the column with the highest value is
    left out first when the table cannot fit (``--wide`` shows them all).
    ``ident``: an id or a name, never wrapped, never cut.
    """

    name: str
    drop: int = 0
    ident: bool = False


Column = str | Col


class Output:
    """Where a command writes: human tables, JSON, or nothing but errors."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False, wide: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        # Tables show every column and wrap nothing, whatever the terminal's width.
        self.wide = wide

    # Human output goes to stdout; progress and notes to stderr so that
    # `--json` stdout stays parseable.
    @cached_property
    def console(self) -> Console:
        from rich.console import Console

        return Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))

    @cached_property
    def err(self) -> Console:
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True, width=_width(sys.stderr))

    @property
    def human(self) -> bool:
        return not self.json_mode and not self.quiet

    def emit(self, document: Mapping[str, object]) -> None:
        """Print a typed document of :mod:`inferfleet.documents` (``--json`` mode)."""
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")
        sys.stdout.flush()

    def line(self, text: str) -> None:
        """A human line on stdout (markup allowed; escape what you interpolate)."""
        if self.human:
            self.console.print(text)

    def note(self, text: str) -> None:
        """A progress note on stderr, shown in human mode only."""
        if self.human:
            self.err.print(text)

    def table(self, title: str | None, columns: Sequence[Column], rows: list[list[str]]) -> None:
        """A table that fits the terminal: no cell broken inside a word.

        A cell wraps between words only; a word longer than its column is
        shortened with an ellipsis; an id column (:class:`Col` ``ident``) is
        never wrapped or cut. When even that cannot fit, the columns with the
        highest ``drop`` are left out and a dim line names them.
        """
        if not self.human:
            return
        from rich import box
        from rich.table import Table
        from rich.text import Text

        cols = [c if isinstance(c, Col) else Col(c) for c in columns]
        plain = [[Text.from_markup(cell).plain for cell in row] for row in rows]
        cells = [[r[i] for r in plain if i < len(r)] for i in range(len(cols))]
        natural = [_natural(c.name, cells[i]) for i, c in enumerate(cols)]
        narrow = [_narrowest(c, cells[i]) for i, c in enumerate(cols)]
        shown = list(range(len(cols)))
        limit = self.console.width
        if self.wide:
            limit = max(limit, _framed([natural[i] for i in shown]))
        else:
            # Leave columns out, highest drop first, until the narrowest layout fits.
            while _framed([narrow[i] for i in shown]) > limit:
                droppable = [i for i in shown if cols[i].drop > 0]
                if not droppable:
                    break
                shown.remove(max(droppable, key=lambda i: (cols[i].drop, i)))
            # A narrow column left out on the way may fit again beside the others.
            for i in sorted(set(range(len(cols))) - set(shown), key=lambda i: (cols[i].drop, i)):
                if _framed([narrow[j] for j in [*shown, i]]) <= limit:
                    shown = sorted([*shown, i])
            # Still too wide: the widest wrapping columns give way, their longest words cut
            # with an ellipsis (abbreviated, never broken across lines).
            while _framed([narrow[i] for i in shown]) > limit:
                wrapping = [i for i in shown if not cols[i].ident and narrow[i] > _FLOOR]
                if not wrapping:
                    break
                narrow[max(wrapping, key=lambda i: narrow[i])] -= 1
        if title is not None:
            # Wrapped between words at the table's width (the console itself soft-wraps).
            self.console.print(title, soft_wrap=False, width=limit)
        table = Table(
            show_lines=False,
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            padding=(0, 1),
        )
        # Widths are set here, not left to rich: its collapse may squeeze a column below
        # its longest word (and break it).
        room = limit - _framed([0] * len(shown))
        widths = _allot([natural[i] for i in shown], [narrow[i] for i in shown], room)
        for i, width in zip(shown, widths, strict=True):
            col = cols[i]
            if col.ident or self.wide:
                table.add_column(col.name, no_wrap=True, width=natural[i])
            else:
                table.add_column(col.name, overflow="ellipsis", width=width)
        for row in rows:
            table.add_row(*(row[i] for i in shown if i < len(row)))
        width = self.console.width
        self.console.width = limit  # rich crops every line at the console's width
        try:
            self.console.print(table)
        finally:
            self.console.width = width
        hidden = [cols[i].name for i in range(len(cols)) if i not in shown]
        if hidden:
            self.console.print(
                f"[dim]({', '.join(hidden)} left out at {limit} columns; --wide shows them)[/dim]",
                soft_wrap=False,
            )


def _natural(header: str, cells: list[str]) -> int:
    """The width a column takes unwrapped."""
    return max([len(header), *(max(map(len, c.splitlines()), default=0) for c in cells)])


# The narrowest a wrapping column gets: its longest word, up to this (longer ones are cut).
_WORD_CAP = 24
_FLOOR = 8  # and never narrower than this


def _narrowest(col: Col, cells: list[str]) -> int:
    """The narrowest width at which the column breaks no word (an id: its whole text)."""
    if col.ident:
        return _natural(col.name, cells)
    words = [len(w) for c in [col.name, *cells] for w in c.split()]
    return max(1, min(max(words, default=1), _WORD_CAP))


def _allot(natural: list[int], narrow: list[int], room: int) -> list[int]:
    """Column widths: each its narrowest, then the room left shared out a character at a
    time among those that want more, until each has its natural width or the room is gone."""
    widths = list(narrow)
    spare = room - sum(widths)
    while spare > 0:
        wanting = [i for i, w in enumerate(widths) if w < natural[i]]
        if not wanting:
            break
        for i in wanting[:spare]:
            widths[i] += 1
        spare -= min(spare, len(wanting))
    return widths


def _framed(widths: list[int]) -> int:
    """A table's width with these column widths, its frame included."""
    return sum(widths) + _EDGE + _BETWEEN * max(0, len(widths) - 1)
