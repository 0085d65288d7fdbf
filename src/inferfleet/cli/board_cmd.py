"""``inferfleet board``: the fleet's status as a live web page on this machine."""

from __future__ import annotations

from pathlib import Path

import typer

from inferfleet.cli.fleet_cmds import (
    AllowHostOpt,
    FleetOpt,
    HostOpt,
    NoSshOpt,
    ResultsOpt,
    resolve_fleet,
    scope,
)
from inferfleet.output import Output, esc
from inferfleet.status import Collector, Options
from inferfleet.status.web import create_app
from inferfleet.status.web_server import serve

DEFAULT_PORT = 8765
FACTS_TTL = 30.0  # seconds a host's ssh facts are reused between polls


def board(
    services: list[str] = typer.Argument(
        None, help="Only the hosts of these services (default: every host); hosts: --host."
    ),
    host: list[str] = HostOpt,
    file: Path | None = FleetOpt,
    port: int = typer.Option(
        DEFAULT_PORT, "--port", "-p", min=0, max=65535, help="Port to serve on (0: any free one)."
    ),
    bind: str = typer.Option(
        "127.0.0.1",
        "--bind",
        help="Address to listen on. The board has no login: keep it on loopback or a trusted LAN.",
    ),
    interval: float = typer.Option(
        2.0,
        "--interval",
        min=0.2,
        help="Seconds between the page's status polls and between collections.",
    ),
    results: Path | None = ResultsOpt,
    no_ssh: bool = NoSshOpt,
    allow_host: list[str] = AllowHostOpt,
) -> None:
    """Serve a status page of the fleet: health, slots, revisions and last bench figures."""
    out = Output()
    loaded = resolve_fleet(file, out)
    hosts = scope(loaded.fleet, services or [], host, out)[1]
    collector = Collector(loaded, Options(ssh=not no_ssh, results_dir=results, facts_ttl=FACTS_TTL))
    app = create_app(collector, hosts=hosts or None, interval=interval, allow_hosts=allow_host)

    def ready(url: str) -> None:
        out.err.print(f"board of {esc(loaded.path)}: {esc(url)}/  (Ctrl-C stops it)")

    serve(app, bind, port, on_ready=ready)
