"""A fleet file edited by a verb (add, runtime adopt): checked, shown, then written whole.

The edit is made on the text (comments kept, importers/fleetedit.py); here
the result is parsed, ``check`` runs on it, and only findings the fleet did
not have before refuse it: the file is then left as it was. ``--dry-run``
prints the diff and writes nothing. The write is atomic (a crash leaves the
old file or the new one).
"""

from __future__ import annotations

import difflib

import typer

from inferfleet.errors import EXIT_FAILED, SpecError, UsageError
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.output import Output, esc


def write_checked(loaded: LoadedFleet, text: str, out: Output, *, dry_run: bool, what: str) -> bool:
    """Write ``text`` over ``loaded``'s file when it adds no error; True when written.

    ``what`` names the change in the diff's header ("with chat"). Exits 1
    (EXIT_FAILED) with the new findings when ``check`` fails on the result.
    """
    from inferfleet.checks.engine import run_checks
    from inferfleet.fleetfile.loader import parse_fleet
    from inferfleet.install import runtime_flags
    from inferfleet.io.files import atomic_write

    file = loaded.path
    try:
        new = LoadedFleet(parse_fleet(text, file), file, text)
    except SpecError as exc:
        raise UsageError(
            f"the edited fleet file would not be valid: {exc.render()}",
            where=str(file),
            hint=f"nothing was written to {file}",
        ) from None
    # What the change breaks: findings the fleet did not have before (L-xx rules).
    flags = runtime_flags.flag_source()
    before = {(f.rule, f.message) for f in run_checks(loaded, flags=flags).errors}
    added = [f for f in run_checks(new, flags=flags).errors if (f.rule, f.message) not in before]
    for finding in added:
        out.line(
            f"[red]error[/red] {esc(finding.rule)} ({esc(finding.lesson)}): {esc(finding.message)}"
        )
    diff = "".join(
        difflib.unified_diff(
            loaded.source.splitlines(keepends=True),
            text.splitlines(keepends=True),
            str(file),
            f"{file} ({what})",
        )
    )
    if (dry_run or added) and out.human:
        out.console.print(diff, markup=False, highlight=False, end="")
    if added:
        out.line(f"[red]not written[/red]: `check` fails on the result; {esc(file)} unchanged")
        raise typer.Exit(EXIT_FAILED)
    if dry_run:
        return False
    atomic_write(file, text)
    return True
