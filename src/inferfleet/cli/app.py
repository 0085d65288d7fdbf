"""The ``inferfleet`` command: a Typer app, one module per verb group.

Expected errors (:class:`FleetError`) print ``where: message -- hint`` on
stderr and exit with the error's code (2 for bad input, 1 for failed
operations); a traceback only with ``INFERFLEET_DEBUG=1``.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

import typer
from rich.console import Console
from rich.markup import escape

from inferfleet import __version__
from inferfleet.cli import fleet_cmds, run_cmds, runtime_cmds
from inferfleet.errors import EXIT_FAILED, FleetError

app = typer.Typer(
    name="inferfleet",
    help="Fleet-as-code for self-hosted LLM inference: one fleet.yaml, reproducible endpoints.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
fleet_cmds.register(app)
run_cmds.register(app)
app.add_typer(runtime_cmds.app, name="runtime")


def _register_optional() -> None:
    # Verb groups that live in their own packages register themselves here.
    try:
        from inferfleet.cli import gguf_cmd
    except ImportError:
        return
    app.add_typer(gguf_cmd.app, name="gguf")


_register_optional()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"inferfleet {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Fleet-as-code for self-hosted LLM inference."""


def _terminated(_signum: int, _frame: object) -> None:
    # SIGTERM takes the same clean-up path as Ctrl-C: children we run (a
    # build, a download) are stopped and nothing half-written stays behind.
    raise KeyboardInterrupt


def main() -> None:
    debug = os.environ.get("INFERFLEET_DEBUG") == "1"
    signal.signal(signal.SIGTERM, _terminated)
    try:
        # Standalone mode: typer formats usage errors and turns Exit into
        # sys.exit itself; only our own errors and real bugs reach us.
        app()
    except FleetError as exc:
        if debug:
            traceback.print_exc()
        _print_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - last resort: no traceback unless asked
        if debug:
            traceback.print_exc()
        else:
            Console(stderr=True).print(
                f"[red]internal error[/red]: {escape(type(exc).__name__)}: {escape(str(exc))}\n"
                "This is a bug in inferfleet. Rerun with INFERFLEET_DEBUG=1 to see the traceback."
            )
        sys.exit(EXIT_FAILED)


def _print_error(exc: FleetError) -> None:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold red]error[/bold red]: {escape(exc.render())}")


if __name__ == "__main__":
    main()
