"""``inferfleet import FORMAT SOURCE``: an existing setup into the fleet file, proven by argv.

The import is all or nothing: the source is read with every problem
collected (file:line), the blocks are merged into the fleet file's text
(comments kept), the result must validate, and every imported service's
argv (what ``show SERVICE`` prints) must match the original command line
flag by flag, up to the differences the import made on purpose. Only then is
the fleet file replaced, atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import typer

from inferfleet.artifacts.manifest import Manifest
from inferfleet.cli.fleet_cmds import OfflineOpt, verb_output
from inferfleet.errors import EXIT_FAILED, FleetError, SpecError, UsageError
from inferfleet.fleetfile.fleet import Fleet, Host, HubSource
from inferfleet.fleetfile.loader import LoadedFleet, load_fleet, parse_fleet
from inferfleet.importers.compare import Comparison, Difference, compare_argv
from inferfleet.importers.fleetedit import merge
from inferfleet.importers.result import Imported
from inferfleet.io.files import atomic_write
from inferfleet.output import Output, esc

app = typer.Typer(
    help="Import an existing setup (llama-swap, systemd, Quadlet, compose, a host's running "
    "servers) into the fleet file.",
    no_args_is_help=True,
)

# -f/--file as on every verb; --out/-o, its first name, kept for scripts.
OutOpt = typer.Option(
    Path("fleet.yaml"),
    "--file",
    "-f",
    "--out",
    "-o",
    help="The fleet file to write; when it exists the import is added to it (comments kept).",
)
HostOpt = typer.Option(
    None,
    "--host",
    help="The host the imported services run on (a host of --out, or a new one); default: "
    "this machine, as host `local`.",
)
DryRunOpt = typer.Option(
    False, "--dry-run", help="Check and report, write nothing; print the fleet file."
)


@dataclass(frozen=True)
class FileFormat:
    """A setup kept in files, imported by the verb of its name."""

    verb: str
    # ``module:function`` under inferfleet.importers, imported when the verb runs:
    # (the files, the host's name, its spec or None) -> what was imported.
    reader: str
    argument: str  # the files' parameter name (their metavar in the help)
    many: bool  # several files (list[Path]) or one (Path)
    help: str  # the files' help
    doc: str  # the verb's help


FILE_FORMATS = (
    FileFormat(
        "llama-swap",
        "llamaswap:read_config",
        "config",
        False,
        "llama-swap's config.yaml.",
        "Import llama-swap's models as services (groups where they swap); argv checked per "
        "service.",
    ),
    FileFormat(
        "systemd",
        "systemd:read_units",
        "units",
        True,
        "Unit files (.service) that start llama-server.",
        "Import systemd units that start llama-server as services (backend systemd).",
    ),
    FileFormat(
        "quadlet",
        "quadlet:read_quadlets",
        "files",
        True,
        "Quadlet .container files running llama-server.",
        "Import Quadlet .container files that run llama-server as services (backend quadlet).",
    ),
    FileFormat(
        "compose",
        "compose:read_compose",
        "file",
        False,
        "A compose file (compose.yaml, docker-compose.yml).",
        "Import a compose file's llama-server services as services (backend quadlet).",
    ),
)


def _file_verb(fmt: FileFormat) -> None:
    """Register ``inferfleet import VERB FILE...`` for ``fmt``: one body for every format."""

    def verb(
        sources: Any = typer.Argument(..., help=fmt.help, metavar=fmt.argument),
        out_file: Path = OutOpt,
        host: str | None = HostOpt,
        dry_run: bool = DryRunOpt,
        offline: bool = OfflineOpt,
    ) -> None:
        out = verb_output(offline)
        module, function = fmt.reader.split(":")
        read = getattr(import_module(f"inferfleet.importers.{module}"), function)
        host_name = host or "local"  # this machine, as host `local`
        existing, fleet = _existing(out_file)
        spec = None if fleet is None else fleet.hosts.get(host_name)
        imported: Imported = read(sources, host_name, spec)
        imported.raise_problems()
        origin = ", ".join(str(path) for path in (sources if fmt.many else [sources]))
        _finish(out, imported, out_file, existing, origin=origin, dry_run=dry_run)

    # Typer reads a parameter's type from the annotations: one file, or several.
    verb.__annotations__["sources"] = list[Path] if fmt.many else Path
    verb.__doc__ = fmt.doc
    app.command(fmt.verb)(verb)


for _format in FILE_FORMATS:
    _file_verb(_format)


@app.command("host")
def host_cmd(
    name: str = typer.Argument(..., help="A host of --out (or `local`, this machine)."),
    port: list[int] = typer.Option(
        [], "--port", help="Only the server listening on this port (repeatable)."
    ),
    out_file: Path = OutOpt,
    dry_run: bool = DryRunOpt,
    offline: bool = OfflineOpt,
) -> None:
    """Import the llama-server, vLLM and SGLang processes running on a host (over ssh)."""
    out = verb_output(offline)
    from inferfleet.deploy.ssh import connector_for
    from inferfleet.importers.host import read_host

    existing, fleet = _existing(out_file)
    host = None if fleet is None else fleet.hosts.get(name)
    if host is None:
        if name != "local":
            raise UsageError(
                f"host {name!r} is not in {out_file}",
                hint="declare it there (address, ssh user) first; `local` is this machine",
            )
        host = Host(address="localhost")
    connector = connector_for(name, host)
    try:
        imported = read_host(
            lambda command: connector.run(command, timeout=60).stdout, name, host, ports=port
        )
    finally:
        connector.close()
    imported.raise_problems()
    _finish(out, imported, out_file, existing, origin=f"host {name}", dry_run=dry_run)


def _existing(path: Path) -> tuple[str | None, Fleet | None]:
    if not path.exists():
        return None, None
    loaded = load_fleet(path)  # an invalid fleet file is reported as it is, untouched
    return loaded.source, loaded.fleet


def _finish(
    out: Output,
    imported: Imported,
    out_file: Path,
    existing: str | None,
    *,
    origin: str,
    dry_run: bool,
) -> None:
    if not imported.services:
        raise UsageError(f"{origin} has no service to import")
    fleet = None if existing is None else parse_fleet(existing, out_file)
    taken: dict[tuple[str, int], str] = {}
    for held_name, held in ({} if fleet is None else fleet.services).items():
        taken[(held.host, held.port)] = f"group {held.group}" if held.group else held_name
    imported.port_clashes(taken)
    imported.raise_problems()
    from inferfleet.importers.hubrefs import resolve_hub_models

    manifests = resolve_hub_models(imported)
    imported.raise_problems()
    text = merge(existing, imported, origin=origin, file=str(out_file))
    try:
        fleet = parse_fleet(text, out_file)
    except SpecError as exc:
        raise UsageError(
            f"the imported fleet would not be valid: {exc.render()}",
            where=origin,
            hint=f"nothing was written to {out_file}",
        ) from None
    for note in imported.notes:
        out.line(f"[yellow]note[/yellow] {esc(note.where)}: {esc(note.text)}")
    loaded = LoadedFleet(fleet, out_file.resolve(), text)
    written = _write_manifests(loaded.root, manifests)
    try:
        results = [_verify(loaded, imported, name) for name in imported.services]
    except BaseException:
        _remove(written)
        raise
    failed = False
    for result in results:
        if isinstance(result, str):
            out.line(f"[yellow]unchecked[/yellow] {esc(result)}")
            continue
        failed |= not result.matches
        _report(out, result)
    if failed or dry_run:
        _remove(written)
    if failed:
        out.line(f"[red]not written[/red]: a service's argv differs; {esc(out_file)} unchanged")
        raise typer.Exit(EXIT_FAILED)
    if dry_run:
        out.line(esc(text))
        return
    try:
        atomic_write(out_file, text)
    except BaseException:
        _remove(written)
        raise
    for path in written:
        out.line(f"[green]wrote[/green] {esc(path)}")
    counts = f"{len(imported.services)} service(s)"
    if imported.groups:
        counts += f", {len(imported.groups)} group(s)"
    out.line(f"[green]wrote[/green] {esc(out_file)}: {counts} from {esc(origin)}")


def _write_manifests(root: Path, manifests: dict[str, Manifest]) -> list[Path]:
    """The Hub models' manifests next to the fleet file (before the argv check reads them);
    an existing file is never replaced."""
    from inferfleet.hub.manifest import write_manifest

    written: list[Path] = []
    for relative, manifest in manifests.items():
        path = root / relative
        if path.exists():
            _remove(written)
            raise UsageError(
                f"{path} exists already",
                hint="remove it, or import into a fleet file in another folder",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        write_manifest(path, manifest)
        written.append(path)
    return written


def _remove(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _verify(loaded: LoadedFleet, imported: Imported, name: str) -> Comparison | str:
    """The service's argv as ``show`` computes it, against the original; a str when unchecked."""
    from inferfleet.cli.fleet_cmds import service_detail

    service = loaded.fleet.services[name]
    model = loaded.fleet.models.get(service.model or "")
    manifest = None if model is None else model.manifest
    hub = model is not None and isinstance(model.source, HubSource)
    if hub and manifest is not None and not (loaded.root / manifest).exists():
        return (
            f"{name}: its Hub model is not resolved yet (see the note above); then "
            f"`inferfleet show {name}` prints its argv"
        )
    try:
        detail = service_detail(loaded, name)
    except FleetError as exc:
        failed = Comparison(name)
        failed.differences.append(
            Difference("(launch)", "-", f"show refuses: {exc.render()}", None)
        )
        return failed
    item = imported.services[name]
    return compare_argv(
        name, item.original, detail["argv"], item.explained, program=item.program, kind=item.kind
    )


def _report(out: Output, result: Comparison) -> None:
    verdict = "[green]same argv[/green]" if result.matches else "[red]argv differs[/red]"
    out.line(f"{verdict} {esc(result.service)}: {result.same} flag(s) as in the original")
    for diff in result.differences:
        text = f"{diff.flag}: {diff.original} -> {diff.rendered}"
        if diff.why is None:
            out.line(f"    [red]differs[/red] {esc(text)}")
        else:
            out.line(f"    {esc(text)} ({esc(diff.why)})")
