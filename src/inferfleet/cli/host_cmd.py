"""``inferfleet host bootstrap HOST``: a bare host made ready for deploys, over ssh.

Checks the host's Python (>= 3.11, with venv), makes inferfleet's own venv
there (the host's ``venv:``), installs this very inferfleet (its wheel built
here and copied over; dependencies from the host's package index, or a
wheelhouse made here), brings the fleet checkout (``checkout:``) to this
revision, enables lingering when user units need it, and runs ``inferfleet
doctor`` there. A second run changes nothing and says so. Progress goes to
stderr; ``--json`` prints an ``inferfleet.bootstrap/v1`` document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, fleet_file, no_fleet_file
from inferfleet.errors import EXIT_FAILED, UsageError
from inferfleet.output import Output, esc

app = typer.Typer(help="Prepare hosts over ssh for deploys.", no_args_is_help=True)


@app.command("bootstrap")
def bootstrap(
    host: str = typer.Argument(..., help="The fleet host to prepare."),
    file: Path | None = FleetOpt,
    python: str = typer.Option(
        "python3", "--python", help="The host's Python (a name on its PATH or a path)."
    ),
    deps: str = typer.Option(
        "auto",
        "--deps",
        help="Where the host's pip gets inferfleet's dependencies: index (the host's "
        "package index), wheelhouse (downloaded here, copied over, --no-index there) or "
        "auto (the index when the host reaches it, else a wheelhouse).",
    ),
    wheel: Path | None = typer.Option(
        None, "--wheel", help="Install this inferfleet wheel (default: built from this one)."
    ),
    build: bool = typer.Option(
        True,
        "--build/--no-build",
        help="Build (or install) the source runtimes the host's services run, there.",
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Prepare a host over ssh: Python check, inferfleet's venv, the checkout, the runtimes its
    services run, linger, doctor."""
    from inferfleet.bootstrap.run import Bootstrap
    from inferfleet.documents import BootstrapDocument
    from inferfleet.fleetfile.loader import load_fleet

    out = Output(json_mode=json_out)
    if deps not in ("auto", "index", "wheelhouse"):
        raise UsageError(
            f"--deps {deps!r} is not one of auto, index, wheelhouse",
            hint="auto picks the index when the host reaches one, else a wheelhouse",
        )
    path = fleet_file(file, out)
    if path is None:
        raise no_fleet_file()
    loaded = load_fleet(path)
    if host not in loaded.fleet.hosts:
        raise UsageError(
            f"no host named {host!r} in {loaded.path}",
            hint=f"known hosts: {', '.join(sorted(loaded.fleet.hosts)) or '(none)'}",
        )

    def progress(text: str) -> None:
        out.err.print(esc(text))  # on stderr in every mode: stdout stays the result

    run = Bootstrap(
        host,
        loaded.fleet.hosts[host],
        loaded.path,
        python=python,
        deps=deps,  # type: ignore[arg-type]  # checked above
        wheel=wheel,
        progress=progress,
    )
    try:
        run.run()
        if build:
            run.build_runtimes(loaded.fleet)
        report = _doctor(loaded, host, progress)
        linger = [f for f in report["findings"] if f["check"] == "linger"]
        if linger:
            run.enable_linger(str(report["facts"]["user"]))
            report = _doctor(loaded, host, progress)
    finally:
        run.close()
    assert run.found is not None
    document: BootstrapDocument = {
        "schema": "inferfleet.bootstrap/v1",
        "host": host,
        "ok": bool(report["ok"]),
        "changed": run.changed,
        "version": run.version,
        "revision": run.revision,
        "steps": [{"step": s.step, "status": s.status, "detail": s.detail} for s in run.steps],
        "doctor": report,
    }
    if json_out:
        out.emit(document)
    else:
        _print(out, run, report)
    if not report["ok"]:
        raise typer.Exit(EXIT_FAILED)


def _doctor(loaded: Any, host: str, progress: Any) -> Any:
    """``inferfleet doctor HOST``'s report, read on the host by its fresh venv."""
    # The doctor verb's own examination (facts over the same ssh connector, findings here).
    from inferfleet.cli.doctor_cmd import examine

    progress(f"{host}: running inferfleet doctor on the host")
    return examine(loaded, host, [])


def _print(out: Output, run: Any, report: Any) -> None:
    from inferfleet.cli.doctor_cmd import print_report

    for step in run.steps:
        colour = {"changed": "yellow", "unchanged": "dim"}.get(step.status, "green")
        out.line(f"[{colour}]{step.status:9}[/{colour}] {step.step:9} {esc(step.detail)}")
    if run.changed:
        out.line(f"[bold]{esc(run.name)}[/bold] bootstrapped")
    else:
        out.line(f"[bold]{esc(run.name)}[/bold]: nothing to do, already bootstrapped")
    print_report(out, report)
