"""`inferfleet archive list|restore|prune`: the host's archive of removed and replaced files.

A deploy never deletes a unit, Quadlet, env or settings file: it files it in
``<state_dir>/archive`` first (:mod:`inferfleet.io.archive`). ``restore``
brings an entry back byte for byte (a retired service's files, for a
rollback, L-40, L-41); ``prune --older-than`` is the only deletion.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import typer

from inferfleet.documents import (
    ArchiveEntryRow,
    ArchiveFileRow,
    ArchiveListDocument,
    ArchivePruneDocument,
    ArchiveRestoredFile,
    ArchiveRestoreDocument,
    ArchiveRestoreRow,
)
from inferfleet.errors import UsageError
from inferfleet.io.archive import Archive, Entry
from inferfleet.io.become import NO_BECOME, Become
from inferfleet.output import Output, esc

app = typer.Typer(
    help="The archive of files deploys removed or replaced: list, restore, prune.",
    no_args_is_help=True,
)

JsonOpt = typer.Option(False, "--json", help="Print a versioned JSON document.")
StateOpt = typer.Option(
    None,
    "--state-dir",
    help="The state directory whose archive to use (default: the host's, from --file, "
    "else INFERFLEET_STATE_DIR or this user's).",
)
FileOpt = typer.Option(None, "--file", "-f", help="Fleet file: use its host's state_dir.")
HostOpt = typer.Option(None, "--host", help="With --file: this host's name in the fleet file.")

MAX_AGE_DAYS = 36500
_DAYS_RE = re.compile(r"^\s*(\d{1,6})\s*d\s*(.*)$", re.IGNORECASE)


def parse_age(text: str) -> float:
    """``--older-than``: ``90d``, ``36h``, ``1d12h``, ``30m``, ``0s``; in seconds.

    Days come first; the rest is a duration as the fleet file writes one
    (:func:`~inferfleet.fleetfile.quantities.parse_duration`). Anything else
    is a :class:`UsageError` naming the accepted forms.
    """
    from inferfleet.fleetfile.quantities import parse_duration

    days, rest = 0, text
    match = _DAYS_RE.match(text)
    if match:
        days, rest = int(match[1]), match[2]
    try:
        if days > MAX_AGE_DAYS:
            raise ValueError(f"{days} days is longer than {MAX_AGE_DAYS} days")
        if not match and not rest.strip():
            raise ValueError("an empty duration")
        if re.fullmatch(r"\s*\d+(\.\d+)?\s*", rest):
            raise ValueError(f"{rest.strip()} what? a bare number is ambiguous here")
        seconds = parse_duration(rest) if rest.strip() else 0.0
    except ValueError as exc:
        raise UsageError(
            f"--older-than {text!r}: {exc}",
            hint="write e.g. 90d, 36h, 1d12h or 30m (days, hours, minutes, seconds); "
            "nothing was pruned",
        ) from None
    return days * 86400.0 + seconds


def _archive(state_dir: Path | None, file: Path | None, host: str | None) -> Archive:
    return _located(state_dir, file, host)[0]


def _located(state_dir: Path | None, file: Path | None, host: str | None) -> tuple[Archive, Become]:
    """The archive, and how its host gets root (the fleet host's ``become``; none without
    a fleet file: ``--become sudo`` says it then)."""
    from inferfleet import paths

    if state_dir is not None:
        return Archive(state_dir), NO_BECOME
    if file is None:
        return Archive(paths.state_dir()), NO_BECOME
    # The host this command runs on, found as `apply` finds it (imported only here).
    from inferfleet.cli.deploy_cmd import _loaded, _this_host

    loaded = _loaded(file)
    host = host or _this_host(loaded)
    found = loaded.fleet.hosts.get(host)
    if found is None:
        raise UsageError(
            f"host {host!r} is not in {file}",
            hint=f"hosts: {', '.join(sorted(loaded.fleet.hosts)) or '(none)'}",
        )
    return Archive(paths.state_dir(found)), Become(host, found.become)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def _row(entry: Entry) -> ArchiveEntryRow:
    index = entry.index
    return ArchiveEntryRow(
        entry=entry.name,
        folder=str(entry.folder),
        service=None if index is None else index.service,
        revision=None if index is None else index.revision,
        reason=None if index is None else index.reason,
        when=_iso(entry.at),
        bytes=entry.bytes,
        files=[]
        if index is None
        else [
            ArchiveFileRow(path=f.path, mode=f"{f.mode:04o}", sha256=f.sha256, size=f.size)
            for f in index.files
        ],
        problem=entry.problem,
        restores=[]
        if index is None
        else [
            ArchiveRestoreRow(when=r.when, paths=list(r.paths), by=r.by, by_revision=r.by_revision)
            for r in index.restores
        ],
    )


@app.command("list")
def list_entries(
    state_dir: Path | None = StateOpt,
    file: Path | None = FileOpt,
    host: str | None = HostOpt,
    json_out: bool = JsonOpt,
) -> None:
    """List the archive's entries, oldest first; a damaged index is shown, never trusted."""
    from inferfleet.fleetfile.quantities import format_size

    out = Output(json_mode=json_out)
    archive = _archive(state_dir, file, host)
    entries = archive.entries()
    if json_out:
        out.emit(
            ArchiveListDocument(
                schema="inferfleet.archive.list/v1",
                archive=str(archive.root),
                entries=[_row(e) for e in entries],
                bytes=sum(e.bytes for e in entries),
            )
        )
        return
    if not entries:
        out.line(f"the archive {esc(str(archive.root))} is empty")
        return
    rows = []
    for e in entries:
        if e.index is None:
            rows.append([esc(e.name), "?", "?", f"[red]damaged[/red]: {esc(e.problem or '')}"])
            continue
        files = ", ".join(f.path for f in e.index.files)
        rows.append(
            [esc(e.name), esc(e.index.service), esc(e.index.reason), esc(files)],
        )
    out.table(f"archive {archive.root}", ["entry", "service", "reason", "files"], rows)
    total = sum(e.bytes for e in entries)
    out.line(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {format_size(total)}")


@app.command("restore")
def restore(
    entry: str = typer.Argument(..., help="The entry's name, as `archive list` shows it."),
    force: bool = typer.Option(
        False, "--force", help="Overwrite a different existing file (it is archived first)."
    ),
    state_dir: Path | None = StateOpt,
    file: Path | None = FileOpt,
    host: str | None = HostOpt,
    become: str | None = typer.Option(
        None,
        "--become",
        help="sudo: write files in folders only root may write (system units) through "
        "`sudo -n` (default: the host's `become` from --file).",
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Put an entry's files back byte for byte, with their modes; refuses to clobber."""
    out = Output(json_mode=json_out)
    if become not in (None, "sudo"):
        raise UsageError(
            f"--become {become!r}: the one escalation there is is sudo",
            hint="pass --become sudo, or leave it out (the host's become from --file)",
        )
    archive, escalation = _located(state_dir, file, host)
    if become is not None:
        escalation = Become(escalation.host or "this machine", "sudo")
    done = archive.restore(entry, force=force, become=escalation)
    if json_out:
        out.emit(
            ArchiveRestoreDocument(
                schema="inferfleet.archive.restore/v1",
                entry=entry,
                files=[ArchiveRestoredFile(path=r.path, outcome=r.outcome) for r in done],
            )
        )
        return
    for r in done:
        out.line(f"{r.outcome} {esc(r.path)}")
    out.note(
        "[dim]a restored unit takes effect after systemctl daemon-reload and a restart; "
        "a retired service's marker is not restored: apply (or rollback) it to run it again[/dim]"
    )


@app.command("prune")
def prune(
    older_than: str = typer.Option(
        ..., "--older-than", help="Delete entries older than this: 90d, 36h, 1d12h, 30m."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would go; delete nothing."),
    state_dir: Path | None = StateOpt,
    file: Path | None = FileOpt,
    host: str | None = HostOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Delete the entries older than --older-than (the only deletion); say what it frees."""
    from inferfleet.fleetfile.quantities import format_size

    seconds = parse_age(older_than)
    out = Output(json_mode=json_out)
    archive = _archive(state_dir, file, host)
    result = archive.prune(seconds, dry_run=dry_run)
    if json_out:
        out.emit(
            ArchivePruneDocument(
                schema="inferfleet.archive.prune/v1",
                archive=str(archive.root),
                older_than=older_than,
                cutoff=_iso(result.cutoff),
                dry_run=dry_run,
                entries=[e.name for e in result.entries],
                freed_entries=len(result.entries),
                freed_bytes=result.bytes,
            )
        )
        return
    verb = "would delete" if dry_run else "deleted"
    for e in result.entries:
        out.line(f"{verb} {esc(e.name)} ({format_size(e.bytes)})")
    out.line(
        f"{'would free' if dry_run else 'freed'} {len(result.entries)} "
        f"entr{'y' if len(result.entries) == 1 else 'ies'}, {format_size(result.bytes)} "
        f"({result.bytes} bytes; entries from before {_iso(result.cutoff)})"
    )
