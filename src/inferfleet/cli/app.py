"""The ``inferfleet`` command: a Typer app, one module per verb group.

Expected errors (:class:`FleetError`) print ``where: message -- hint`` on
stderr and exit with the error's code (2 for bad input, 1 for failed
operations); a traceback only with ``INFERFLEET_DEBUG=1``.

Start-up is part of the interface: the CLI runs in loops, in CI and on every
host of every deploy. Only the invoked verb's module is imported; the verb
list in ``--help`` comes from the registry below (its help strings live here),
and ``--version`` answers before any verb or rich is imported.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

from inferfleet import __version__
from inferfleet.errors import EXIT_FAILED, EXIT_INTERRUPTED, FleetError

if TYPE_CHECKING:
    from types import ModuleType

    import typer


class Verb:
    """One verb: the module under ``inferfleet.cli`` that defines it, how it
    attaches ("register": the module's function named after the verb, ``-`` as
    ``_``, is a top-level verb; "group": its ``app`` is a sub-app named after the
    verb) and its one-line help for the verb list (the same line as the command's
    own docstring's first line)."""

    __slots__ = ("module", "how", "help")

    def __init__(self, module: str, how: str, help: str) -> None:
        self.module = module
        self.how = how
        self.help = help


# In the order `inferfleet --help` lists them.
VERBS: dict[str, Verb] = {
    "validate": Verb(
        "fleet_cmds",
        "register",
        "Check a fleet file: YAML, schema and cross-references. Exit 2 when invalid.",
    ),
    "show": Verb(
        "fleet_cmds", "register", "Show the fleet, or one service with the exact argv it runs."
    ),
    "schema": Verb(
        "fleet_cmds",
        "register",
        "Print the fleet file's JSON Schema (for editor validation and completion).",
    ),
    "init": Verb(
        "fleet_cmds",
        "register",
        "Scaffold a fleet repo: fleet.yaml, .gitignore, pre-commit + CI running check --strict.",
    ),
    "import": Verb(
        "import_cmd",
        "group",
        "Import an existing setup (llama-swap, systemd, Quadlet, compose, a host's running "
        "servers) into the fleet file.",
    ),
    "add": Verb(
        "add_cmd",
        "register",
        "Add a Hub model and a service for it (manifest pinned, checked, comments kept).",
    ),
    "up": Verb(
        "run_cmds",
        "register",
        "Bring this machine's services up: build, verify, start, health-gate, check.",
    ),
    "down": Verb(
        "run_cmds",
        "register",
        "Stop this machine's services by their recorded pid (never by name, L-43).",
    ),
    "status": Verb(
        "run_cmds",
        "register",
        "Health, pid, uptime, slots, revision and last bench of every service; "
        "exit 1 on a problem.",
    ),
    "stop": Verb(
        "ops_cmds",
        "register",
        "Stop one service on its host (any backend); --hold keeps it down until `start`.",
    ),
    "start": Verb(
        "ops_cmds",
        "register",
        "Start one service on its host (any backend), gated as `up`; lifts a hold.",
    ),
    "restart": Verb(
        "ops_cmds",
        "register",
        "Stop, then start one service on its host (any backend), gated as `up`.",
    ),
    "logs": Verb(
        "ops_cmds",
        "register",
        "Print the last lines of a service's log (process log or unit journal, any host).",
    ),
    "doctor": Verb(
        "doctor_cmd",
        "register",
        "Discover GPUs, memory, limits and tools of hosts; compare them with the fleet file.",
    ),
    "host": Verb("host_cmd", "group", "Prepare hosts over ssh for deploys."),
    "check": Verb(
        "check_cmd",
        "register",
        "Check the fleet against every lesson encoded as a rule (schema first).",
    ),
    "completion": Verb(
        "completion_cmd",
        "register",
        "Print the shell completion script for bash, zsh or fish.",
    ),
    "explain": Verb(
        "explain_cmd",
        "register",
        "Explain a lesson (L-25) or a check rule: what happened, why, what inferfleet does.",
    ),
    "render": Verb(
        "render_cmd",
        "register",
        "Write every artifact (units, env files, monitoring, client configs) to --out.",
    ),
    "diff": Verb(
        "render_cmd",
        "register",
        "Show what `render` would change in a directory of previously rendered artifacts.",
    ),
    "render-settings": Verb(
        "render_cmd",
        "register",
        "Render a service's third-party settings files from env files (L-54), on the host.",
    ),
    "probe": Verb(
        "probe_cmd",
        "register",
        "Check an endpoint's contract: APIs, slots and window, tools, reasoning, vision, metrics.",
    ),
    "bench": Verb(
        "bench_cmd",
        "register",
        "Benchmark endpoints on real, salted prompts with the server's own token counts.",
    ),
    "tune": Verb(
        "tune_cmd",
        "register",
        "Find the service's best settings by measurement, and propose them as a change.",
    ),
    "budget": Verb(
        "budget_cmd",
        "register",
        "Memory per device of llama.cpp services: weights, KV, compute, projector, drafter, "
        "headroom; fits or not. vLLM services on a safetensors model: weights, KV bytes per "
        "token, the KV pool in blocks and tokens, whether every slot fits. Exits 1 when a "
        "device does not fit or a vLLM pool holds not even one window (fewer windows than "
        "slots is a note: vLLM schedules by actual use), 2 when a service could not be sized "
        "(the reason is printed).",
    ),
    "plan": Verb(
        "deploy_cmd",
        "register",
        "Per host, the services whose inputs changed since the revision recorded there.",
    ),
    "deploy": Verb(
        "deploy_cmd",
        "register",
        "Push, then on each host: git pull --ff-only and inferfleet apply, gated per service.",
    ),
    "apply": Verb(
        "deploy_cmd",
        "register",
        "On the host: gates, stop, install, start, health gate, marker; service by service.",
    ),
    "rollback": Verb(
        "deploy_cmd",
        "register",
        "Apply one service as of an earlier revision, gated like a deploy.",
    ),
    "board": Verb(
        "board_cmd",
        "register",
        "Serve a status page of the fleet: health, slots, revisions and last bench figures.",
    ),
    "runtime": Verb(
        "runtime_cmds", "group", "Install and inspect runtimes (llama.cpp builds, vLLM venvs)."
    ),
    "facts": Verb(
        "facts_cmd",
        "group",
        "Record models' header facts in the fleet repo (facts/) for checks without the files.",
    ),
    "gguf": Verb(
        "gguf_cmd", "group", "Read GGUF headers (metadata and tensor infos; never tensor data)."
    ),
    "models": Verb(
        "models_cmd", "group", "Model files: Hub manifests, verified resumable fetch, verify."
    ),
    "secrets": Verb("secrets_cmd", "group", "Keep secrets out of the repository (L-55)."),
    "relay": Verb("relay_cmd", "group", "Deliver Alertmanager alerts to a command of your choice."),
    "archive": Verb(
        "archive_cmd",
        "group",
        "The archive of files deploys removed or replaced: list, restore, prune.",
    ),
}

PROG = "inferfleet"
COMPLETE_VAR = "_INFERFLEET_COMPLETE"  # the variable the completion scripts set
HELP = "Fleet-as-code for self-hosted LLM inference: one fleet.yaml, reproducible endpoints."


def _new_app() -> typer.Typer:
    import typer

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

    app = typer.Typer(
        name="inferfleet",
        help=HELP,
        no_args_is_help=True,
        # Completion scripts come from `inferfleet completion SHELL` (one verb, listed
        # with the others) rather than two options on every invocation.
        add_completion=False,
        pretty_exceptions_enable=False,
        # `-h` as in the tools our users know; inherited by every verb and sub-verb.
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    return app


def build_app(verb: str | None = None, *, full: bool = False) -> typer.Typer:
    """The Typer app for running ``verb``: only that verb's module is imported.

    With no known ``verb`` (``--help``, no arguments, a mistyped verb) every verb
    is listed from :data:`VERBS` without importing its module; ``full=True``
    imports and attaches every verb (for tests and tools that want the whole app).
    """
    app = _new_app()
    if verb not in VERBS and not full:
        for name, entry in VERBS.items():
            app.command(name, help=entry.help, add_help_option=False)(_listed)
        return app
    # The invoked verb's module attaches all its verbs, as the full app does.
    wanted = {n: e for n, e in VERBS.items() if full or e.module == VERBS[str(verb)].module}
    modules = {m: _verb_module(m) for m in dict.fromkeys(e.module for e in wanted.values())}
    for name, entry in wanted.items():
        module = modules[entry.module]
        if module is None:
            continue  # a verb group this installation does not ship
        if entry.how == "register":
            app.command(name)(getattr(module, name.replace("-", "_")))
        else:
            app.add_typer(module.app, name=name)
    return app


def _verb_module(name: str) -> ModuleType | None:
    import importlib

    try:
        return importlib.import_module(f"inferfleet.cli.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"inferfleet.cli.{name}":
            raise
        return None


def _listed() -> None:
    """A verb as listed by ``--help``; never run (a known verb builds its real app)."""


_full_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    # `inferfleet.cli.app.app`: the app with every verb, for tests and tools
    # that want a Typer object; main() builds its own, lazily.
    global _full_app
    if name == "app":
        if _full_app is None:
            _full_app = build_app(full=True)
        return _full_app
    raise AttributeError(name)


def _first_verb(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _terminated(_signum: int, _frame: object) -> None:
    # SIGTERM takes the same clean-up path as Ctrl-C: children we run (a
    # build, a download) are stopped and nothing half-written stays behind.
    raise KeyboardInterrupt


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:
        # The most common probe of an installation (scripts, CI, every deploy
        # host): answered before Typer, rich or any verb is imported.
        sys.stdout.write(f"inferfleet {__version__}\n")
        return
    debug = os.environ.get("INFERFLEET_DEBUG") == "1"
    signal.signal(signal.SIGTERM, _terminated)

    try:
        if argv[:1] == ["apply"] and os.environ.get("INFERFLEET_NO_MEMO") != "1":
            # A deploy's apply on a host with nothing to do: answered from the
            # host's no-op memo before Typer, pydantic or the fleet model load.
            from inferfleet.deploy import noop

            if noop.answer(argv[1:]):
                return
        if os.environ.get(COMPLETE_VAR):
            # The shell asks for completions (scripts from `inferfleet completion`):
            # every verb's options must be known, so the whole app is built.
            # Typer's completion classes (its `--show-completion` registers them the same way).
            from typer._completion_classes import completion_init

            completion_init()
            build_app(full=True)(prog_name=PROG)
            return
        # Standalone mode: typer formats usage errors and turns Exit into
        # sys.exit itself; only our own errors and real bugs reach us.
        build_app(_first_verb(argv))()
    except FleetError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        _print_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        from rich.console import Console

        Console(stderr=True).print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - last resort: no traceback unless asked
        from rich.console import Console
        from rich.markup import escape

        if debug:
            import traceback

            traceback.print_exc()
        else:
            Console(stderr=True).print(
                f"[red]internal error[/red]: {escape(type(exc).__name__)}: {escape(str(exc))}\n"
                "This is a bug in inferfleet. Rerun with INFERFLEET_DEBUG=1 to see the traceback."
            )
        sys.exit(EXIT_FAILED)
    finally:
        offline = sys.modules.get("inferfleet.io.offline")  # loaded by a verb that went offline
        if offline is not None:
            offline.end_verb()


def _print_error(exc: FleetError) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold red]error[/bold red]: {escape(exc.render())}")


if __name__ == "__main__":
    main()
