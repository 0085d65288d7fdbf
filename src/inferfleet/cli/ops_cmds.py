"""Day-2 verbs for one service on any host and backend: stop, start, restart, logs.

A service of this machine is handled here; a service of another host over
ssh, by the same verb run in that host's checkout (``--host NAME`` there, as
deploy runs ``apply``), its output streamed back and its exit code kept. The
work itself is :mod:`inferfleet.deploy.operate`'s.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from inferfleet.cli.fleet_cmds import FleetOpt, NoContractOpt, resolve_fleet
from inferfleet.errors import ContractFailingError, UsageError
from inferfleet.output import Output, esc

if TYPE_CHECKING:
    from inferfleet.deploy.local import UpResult
    from inferfleet.fleetfile.loader import LoadedFleet

HereOpt = typer.Option(
    None,
    "--host",
    help="This host's name in the fleet file (what the deploying side passes over ssh).",
)
GraceOpt = typer.Option(10.0, "--grace", help="Seconds between SIGTERM and SIGKILL.")


def _remote(loaded: LoadedFleet, service: str, here: str | None) -> str | None:
    """The host to reach over ssh for ``service``, or None when it is handled here."""
    from inferfleet.deploy.local import local_services
    from inferfleet.fleetfile.groups import unit_service

    if here is not None:
        return None
    local_services(loaded, service)  # a known service, else a usage error
    host = unit_service(loaded.fleet, service).host
    return None if loaded.fleet.hosts[host].is_local(host) else host


def _over_ssh(loaded: LoadedFleet, host: str, verb: str, *args: str) -> None:
    """Run the verb on ``host`` in its checkout; its output here, line by line; its exit code."""
    from inferfleet.deploy.rollout import Fleetside

    side = Fleetside.of(loaded)
    conn = side.connector(host)

    def echo(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    done = conn.stream(side.verb_command(conn, host, verb, *args), echo)
    if done.returncode != 0:
        raise typer.Exit(done.returncode)


def stop(
    service: str = typer.Argument(..., help="The service to stop (on whichever host runs it)."),
    hold: str | None = typer.Option(
        None,
        "--hold",
        help="Keep it down: apply, deploy and up leave it stopped until `inferfleet start`.",
    ),
    file: Path | None = FleetOpt,
    here: str | None = HereOpt,
    grace: float = GraceOpt,
) -> None:
    """Stop one service on its host (any backend); --hold keeps it down until `start`."""
    from inferfleet.deploy import operate

    out = Output()
    loaded = resolve_fleet(file, out, last_up=True)
    remote = _remote(loaded, service, here)
    if remote is not None:
        extra = ["--grace", str(grace), *(["--hold", hold] if hold is not None else [])]
        _over_ssh(loaded, remote, "stop", service, *extra)
        return
    done = operate.stop(
        loaded, service, here=here, hold=hold, grace=grace, note=lambda t: out.note(esc(t))
    )
    text = "stopped" if done.outcome == "stopped" else "was not running"
    out.line(f"{esc(done.service)} on {esc(done.host)}: {text}")
    if done.hold is not None:
        out.line(f"  {esc(done.hold.describe())}; `inferfleet start {esc(done.service)}` lifts it")


def start(
    service: str = typer.Argument(..., help="The service to start; lifts its hold."),
    file: Path | None = FleetOpt,
    here: str | None = HereOpt,
    no_contract: bool = NoContractOpt,
) -> None:
    """Start one service on its host (any backend), gated as `up`; lifts a hold."""
    _start_or_restart("start", service, file, here, no_contract=no_contract)


def restart(
    service: str = typer.Argument(..., help="The service to restart (a held one is refused)."),
    file: Path | None = FleetOpt,
    here: str | None = HereOpt,
    grace: float = GraceOpt,
    no_contract: bool = NoContractOpt,
) -> None:
    """Stop, then start one service on its host (any backend), gated as `up`."""
    _start_or_restart("restart", service, file, here, no_contract=no_contract, grace=grace)


def _start_or_restart(
    verb: str,
    service: str,
    file: Path | None,
    here: str | None,
    *,
    no_contract: bool,
    grace: float = 10.0,
) -> None:
    from inferfleet.cli.run_cmds import print_up, up_hooks
    from inferfleet.deploy import operate

    out = Output()
    loaded = resolve_fleet(file, out, last_up=True)
    remote = _remote(loaded, service, here)
    if remote is not None:
        extra = [*(["--no-contract"] if no_contract else [])]
        if verb == "restart":
            extra += ["--grace", str(grace)]
        _over_ssh(loaded, remote, verb, service, *extra)
        return
    hooks, progress = up_hooks(out)
    with progress if progress is not None else contextlib.nullcontext():
        if verb == "start":
            done = operate.start(loaded, service, hooks, here=here, contract=not no_contract)
        else:
            done = operate.restart(
                loaded, service, hooks, here=here, grace=grace, contract=not no_contract
            )
    print_up(out, [done])
    _contract_failed(done)


def _contract_failed(done: UpResult) -> None:
    if done.contract_failing:
        raise ContractFailingError(
            "healthy, but its contract probe fails: "
            + (done.evidence[0] if done.evidence else "see the checks above"),
            where=f"service {done.service}",
            hint="it keeps running and its marker says 'contract: failing'; fix the fleet file "
            "or the runtime so the server honours what it declares (L-25), then start it again",
        )


def logs(
    service: str = typer.Argument(..., help="The service whose log to show."),
    lines: int = typer.Option(50, "--lines", "-n", help="How many lines from the end."),
    # -f is --file in every verb (one meaning per flag): following is -F, as `tail -F`.
    follow: bool = typer.Option(
        False, "--follow", "-F", help="Keep printing new lines as they come."
    ),
    file: Path | None = FleetOpt,
    here: str | None = HereOpt,
) -> None:
    """Print the last lines of a service's log (process log or unit journal, any host)."""
    from inferfleet.deploy import operate

    if lines < 0:
        raise UsageError(f"-n {lines}: give a number of lines, 0 or more")
    loaded = resolve_fleet(file, Output(), last_up=True)
    remote = _remote(loaded, service, here)
    if remote is not None:
        _over_ssh(loaded, remote, "logs", service, "-n", str(lines), *(["-F"] if follow else []))
        return

    def echo(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    operate.logs(loaded, service, here=here, lines=lines, follow=follow, echo=echo)
