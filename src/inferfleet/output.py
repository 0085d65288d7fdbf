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
from collections.abc import Mapping
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


class Output:
    """Where a command writes: human tables, JSON, or nothing but errors."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet

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

    def table(self, title: str | None, columns: list[str], rows: list[list[str]]) -> None:
        if not self.human:
            return
        from rich import box
        from rich.table import Table

        table = Table(
            title=title,
            title_justify="left",
            show_lines=False,
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            padding=(0, 1),
        )
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        self.console.print(table)
