"""The ``inferfleet`` command: a Typer app, one module per verb group.

Expected errors (:class:`FleetError`) print ``where: message -- hint`` on
stderr and exit with the error's code (2 for bad input, 1 for failed
operations); a traceback only with ``INFERFLEET_DEBUG=1``.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import traceback

import typer
from rich.console import Console
from rich.markup import escape

from inferfleet import __version__
from inferfleet.errors import EXIT_FAILED, FleetError

# Verb -> (module under inferfleet.cli, how it attaches). "register": the
# module's register(app) adds top-level verbs; "group": its `app` is a
# sub-app named after the verb. Modules are imported only for the verb being
# run (help imports them all): `inferfleet up` should not pay for importing
# the GGUF reader or the plotting stack.
VERBS: dict[str, tuple[str, str]] = {
    "init": ("fleet_cmds", "register"),
    "validate": ("fleet_cmds", "register"),
    "show": ("fleet_cmds", "register"),
    "schema": ("fleet_cmds", "register"),
    "up": ("run_cmds", "register"),
    "down": ("run_cmds", "register"),
    "status": ("run_cmds", "register"),
    "logs": ("run_cmds", "register"),
    "runtime": ("runtime_cmds", "group"),
    "gguf": ("gguf_cmd", "group"),
    "check": ("check_cmd", "register"),
    "render": ("render_cmd", "register"),
    "diff": ("render_cmd", "register"),
    "render-settings": ("render_cmd", "register"),
    "models": ("models_cmd", "group"),
    "probe": ("probe_cmd", "register"),
    "bench": ("bench_cmd", "register"),
    "secrets": ("secrets_cmd", "group"),
    "budget": ("budget_cmd", "register"),
    "plan": ("deploy_cmd", "register"),
    "deploy": ("deploy_cmd", "register"),
    "apply": ("deploy_cmd", "register"),
    "rollback": ("deploy_cmd", "register"),
    "board": ("board_cmd", "register"),
    "relay": ("relay_cmd", "group"),
}


def build_app(verb: str | None = None) -> typer.Typer:
    """The Typer app with every verb group, or only the one ``verb`` needs."""
    app = typer.Typer(
        name="inferfleet",
        help="Fleet-as-code for self-hosted LLM inference: one fleet.yaml, reproducible endpoints.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    wanted = [VERBS[verb]] if verb in VERBS else list(VERBS.values())
    done: set[str] = set()
    for module_name, how in wanted:
        if module_name in done:
            continue
        done.add(module_name)
        try:
            module = importlib.import_module(f"inferfleet.cli.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"inferfleet.cli.{module_name}":
                raise
            continue  # a verb group this installation does not ship
        if how == "register":
            module.register(app)
        else:
            names = [v for v, (m, _h) in VERBS.items() if m == module_name]
            app.add_typer(module.app, name=names[0])
    return app


_full_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    # `inferfleet.cli.app.app`: the app with every verb, for tests and tools
    # that want a Typer object; main() builds its own, lazily.
    global _full_app
    if name == "app":
        if _full_app is None:
            _full_app = build_app()
        return _full_app
    raise AttributeError(name)


def _first_verb(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _version(value: bool) -> None:
    if value:
        typer.echo(f"inferfleet {__version__}")
        raise typer.Exit()


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
        build_app(_first_verb(sys.argv[1:]))()
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
