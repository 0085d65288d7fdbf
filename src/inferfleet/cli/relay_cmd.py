"""``inferfleet relay``: deliver Alertmanager's alerts to a command (a chat CLI, mail).

``relay serve -- CMD ARGS...`` receives Alertmanager webhooks and runs the
command once per alert with the alert in ``INFERFLEET_ALERT_*`` variables;
``relay config`` prints the Alertmanager configuration pointing at it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import typer

from inferfleet.bounded import MAX_SECRET_FILE, read_bounded_text
from inferfleet.cli.fleet_cmds import AllowHostOpt
from inferfleet.errors import UsageError
from inferfleet.io.files import atomic_write
from inferfleet.output import Output, esc, visible
from inferfleet.relay import alertmanager
from inferfleet.relay.app import ALERTS_PATH, create_app
from inferfleet.relay.runner import CommandRunner, Delivery
from inferfleet.render.exposure import is_loopback
from inferfleet.status.web_server import serve

DEFAULT_PORT = 9099

app = typer.Typer(
    help="Deliver Alertmanager alerts to a command of your choice.", no_args_is_help=True
)


def read_token(path: Path) -> str:
    """The bearer token from a file only its owner can read (L-06: never on a command line)."""
    token = read_bounded_text(
        path,
        MAX_SECRET_FILE,
        what="token file",
        error=UsageError,
        hint="write the token into a file with mode 600",
        private=True,
    ).strip()
    if not token:
        raise UsageError(f"the token file {path} is empty", hint="write the token into it")
    return token


def check_command(command: list[str]) -> None:
    if not command:
        raise UsageError(
            "no command to run for each alert",
            hint="give it after --, e.g. inferfleet relay serve -- notify-send inferfleet",
        )
    program = command[0]
    found = shutil.which(program) if os.sep not in program else program
    if found is None or not os.access(found, os.X_OK) or os.path.isdir(found):
        raise UsageError(
            f"the alert command {program!r} is not an executable program",
            hint="give the program's path or put it on PATH; shell syntax is not run "
            "(use sh -c '...' explicitly if you need a shell)",
        )


@app.command("serve")
def serve_relay(
    command: list[str] = typer.Argument(
        None, help="Program and arguments run once per alert (after --)."
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", "-p", min=0, max=65535),
    bind: str = typer.Option("127.0.0.1", "--bind", help="Address to listen on."),
    timeout: float = typer.Option(
        30.0, "--timeout", min=1.0, help="Seconds the command may run per alert."
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="Require this bearer token (file of mode 600)."
    ),
    allow_host: list[str] = AllowHostOpt,
    insecure_no_token: bool = typer.Option(
        False,
        "--insecure-no-token",
        help="Listen beyond loopback without a token: anyone who reaches the port runs "
        "the command with text of their choosing.",
    ),
) -> None:
    """Receive Alertmanager webhooks on POST /alerts and run COMMAND for each alert."""
    out = Output()
    command = list(command or [])
    check_command(command)
    token = None if token_file is None else read_token(token_file)
    if token is None and not is_loopback(bind) and not insecure_no_token:
        # Closed by default (L-58): beyond loopback, whoever reaches the port would
        # run the alert command with text of their choosing.
        raise UsageError(
            f"--bind {bind} reaches beyond this host, and no --token-file is given",
            hint="give --token-file (Alertmanager sends it as its bearer credentials), bind "
            "127.0.0.1, or pass --insecure-no-token to accept anyone who reaches the port",
        )

    def log(delivery: Delivery) -> None:
        outcome = (
            "[green]ok[/green]"
            if delivery.ok
            else f"[red]failed[/red] ({esc(delivery.returncode)}) "
            f"{esc(visible(delivery.error[-200:]))}"
        )
        # Alert text came over the network: no terminal escapes, no forged log lines.
        alert = esc(visible(delivery.alert))
        out.err.print(f"relay: {alert} -> {outcome} in {delivery.seconds:.2f}s")

    runner = CommandRunner(command, timeout=timeout, on_delivery=log)

    def ready(url: str) -> None:
        out.err.print(f"relay: POST {esc(url)}{ALERTS_PATH} runs {esc(' '.join(command))}")

    try:
        serve(create_app(runner, token=token, allow_hosts=allow_host), bind, port, on_ready=ready)
    finally:
        runner.close(grace=5.0)  # a command still running keeps its own timeout


@app.command("config")
def config(
    url: str = typer.Option(
        f"http://127.0.0.1:{DEFAULT_PORT}{ALERTS_PATH}", "--url", help="The relay's webhook URL."
    ),
    token_file: str | None = typer.Option(
        None, "--token-file", help="Path of the token file on the Alertmanager host."
    ),
    group_wait: str = typer.Option("30s", "--group-wait"),
    group_interval: str = typer.Option("5m", "--group-interval"),
    repeat_interval: str = typer.Option("4h", "--repeat-interval"),
    out_file: Path | None = typer.Option(None, "--out", help="Write here instead of stdout."),
) -> None:
    """Print (or write) alertmanager.yml with the relay as its webhook receiver."""
    text = alertmanager.render(
        url,
        credentials_file=token_file,
        group_wait=group_wait,
        group_interval=group_interval,
        repeat_interval=repeat_interval,
    )
    if out_file is None:
        typer.echo(text, nl=False)
        return
    out_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out_file, text, mode=0o644)
