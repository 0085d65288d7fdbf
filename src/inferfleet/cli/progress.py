"""Progress bars on stderr for the CLI verbs (human output only; JSON mode shows none)."""

from __future__ import annotations

from collections.abc import Callable

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from inferfleet.output import Output, esc


def steps_progress(out: Output, *, spinner: bool = False) -> Progress:
    """Counted steps (a build's compile steps): description, bar, done/total, elapsed."""
    lead: list[ProgressColumn] = [SpinnerColumn()] if spinner else []
    return Progress(
        *lead,
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out.err,
        transient=True,
    )


def bytes_progress(
    out: Output, description: str = "{task.description}", *, binary_units: bool = False
) -> Progress:
    """Bytes read or fetched: description, bar, size, rate, time left."""
    return Progress(
        TextColumn(description),
        BarColumn(),
        DownloadColumn(binary_units=binary_units),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=out.err,
        transient=True,
    )


def note_above(progress: Progress) -> Callable[[str], None]:
    """Print a dim line above the bars (a build's phase, a step's note)."""

    def note(text: str) -> None:
        progress.console.print(f"[dim]{esc(text)}[/dim]")

    return note
