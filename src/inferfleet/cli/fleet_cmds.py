"""Read-only verbs on the fleet file: validate, show, schema."""

from __future__ import annotations

import json
import os
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.groups import members, unit_service
from inferfleet.output import Output, esc

# Every verb module imports this one for its options: the fleet model (pydantic)
# and the documents load only when a fleet is read, inside the functions.
if TYPE_CHECKING:
    from collections.abc import Sequence

    from inferfleet.documents import ShowServiceDocument
    from inferfleet.fleetfile.fleet import Fleet
    from inferfleet.fleetfile.loader import LoadedFleet

FileArg = typer.Argument(
    None, help="Fleet file (default: $INFERFLEET_FILE, ./fleet.yaml, or the nearest parent's)."
)
JsonOpt = typer.Option(False, "--json", help="Print a versioned JSON document.")
WideOpt = typer.Option(
    False, "--wide", help="Every column, nothing wrapped (tables otherwise fit the terminal)."
)
FleetOpt = typer.Option(
    None,
    "--file",
    "-f",
    help="Fleet file (default: $INFERFLEET_FILE, ./fleet.yaml, or the nearest parent's).",
)

# Every verb that could reach the network beyond the fleet's hosts (the Hub, a package
# index): nothing but what is here or cached (io/offline.py; HF_HUB_OFFLINE=1 alike).
OfflineOpt = typer.Option(
    False,
    "--offline",
    help="No network request beyond the fleet's hosts (as HF_HUB_OFFLINE=1; pip and uv "
    "without their index): only what is here or cached.",
)


KeyEnvOpt = typer.Option(
    None,
    "--key-env",
    help="Send the API key held in this environment variable (a server that requires one, "
    "L-58; never the key itself on the command line, L-06).",
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def key_from_env(name: str) -> str:
    """The API key in environment variable ``name``, or a UsageError that says what to set."""
    if not _ENV_NAME.fullmatch(name):
        raise UsageError(
            f"--key-env {name!r} is not an environment variable name",
            hint="e.g. --key-env LLAMA_API_KEY (letters, digits and _, not a digit first)",
        )
    value = os.environ.get(name, "")
    if not value or not value.isprintable() or value != value.strip():
        raise UsageError(
            f"--key-env {name}: the environment has no usable key in {name}"
            + (" (empty)" if not value else " (spaces or control characters)"),
            hint=f"export {name}=... (the server's key) and run the command again",
        )
    return value


def verb_output(offline: bool, json_out: bool = False) -> Output:
    """The verb's output, with ``--offline`` on for the rest of the verb (undone by ``main``
    when it ends): a verb's first step, before anything could reach the network."""
    if offline:
        from inferfleet.io import offline as offline_mode

        offline_mode.go_offline()
    return Output(json_mode=json_out)


# The board's and the relay's --allow-host: names other than IPs and localhost are
# refused unless listed, so a DNS-rebinding page cannot read them.
AllowHostOpt = typer.Option(
    [],
    "--allow-host",
    help="A host name clients use to reach this server (IP addresses and localhost "
    "always work; other names are refused against DNS rebinding). Repeatable.",
)
# up, start and restart: the contract probe that follows the health gate.
NoContractOpt = typer.Option(
    False, "--no-contract", help="Skip the contract probe after the health gate."
)
# status and board: options of the one collector (inferfleet.status) behind both.
NoSshOpt = typer.Option(
    False, "--no-ssh", help="Read remote hosts over HTTP only (no pids, no revisions)."
)
ResultsOpt = typer.Option(
    None, "--results", help="Bench results folder (default: the state dir's bench/)."
)


def embedded_example() -> Path:
    """The embedded default fleet shipped inside the package."""
    return Path(str(resources.files("inferfleet").joinpath("examples/local/fleet.yaml")))


def fleet_file(path: Path | None, out: Output | None = None) -> Path | None:
    """The fleet file a verb reads: ``path``, else the discovered one; None when there is none.

    The discovery order (``$INFERFLEET_FILE``, ``./fleet.yaml``, the nearest
    parent up to the git repository's top) lives in
    :mod:`inferfleet.fleetfile.discover`; a file found other than in the
    current directory is named on stderr.
    """
    from inferfleet.fleetfile.discover import ENV_VAR, discover

    if path is not None:
        return path
    try:
        found = discover()
    except FileNotFoundError as exc:
        raise UsageError(
            f"${ENV_VAR} names {str(exc)!r}, which is not a file",
            hint=f"point {ENV_VAR} at your fleet.yaml, or unset it",
        ) from None
    if found is None:
        return None
    located, how = found
    if out is not None and how != "the current directory":
        out.note(f"[dim]using {esc(located)} (from {how})[/dim]")
    return located


def no_fleet_file() -> UsageError:
    """The error of a verb that found no fleet file (exit 2), with the fix."""
    from inferfleet.fleetfile.discover import ENV_VAR, FLEET_FILE_NAME

    return UsageError(
        f"no fleet file: no {FLEET_FILE_NAME} here or in a parent directory "
        f"(up to the git repository's top), and ${ENV_VAR} is not set",
        hint=f"pass --file PATH, set {ENV_VAR}=PATH, run in the fleet repository, "
        "or create one with `inferfleet init`",
    )


def one_file(positional: Path | None, option: Path | None) -> Path | None:
    """The fleet file of a verb that takes it both ways: ``-f/--file`` (every verb) and the
    positional it took before (kept for scripts). Two different files are a usage error."""
    if positional is not None and option is not None and positional != option:
        from inferfleet.errors import UsageError

        raise UsageError(
            f"two fleet files given: {positional} and --file {option}",
            hint="give the fleet file once, as -f/--file",
        )
    return option if option is not None else positional


ServicesArg = typer.Argument(
    None, help="Only these services (default: all of them); hosts are named with --host."
)
HostOpt = typer.Option([], "--host", help="Only this host (repeatable).")


def scope(
    fleet: Fleet, names: Sequence[str], hosts: Sequence[str], out: Output | None = None
) -> tuple[list[str], list[str]]:
    """(services, hosts) a verb works on: positionals name services on every verb, hosts come
    from ``--host``; a service also brings its host into scope.

    A positional that names a host and no service is taken as ``--host``, with a note:
    scripts written when ``status``/``doctor``/``plan``/``deploy``/``board`` took hosts
    there keep working.
    """
    services: list[str] = []
    wanted = list(hosts)
    for name in names:
        if name in fleet.services or name in fleet.groups:
            services.append(name)
        elif name in fleet.hosts:
            wanted.append(name)
            if out is not None:
                out.note(f"[dim]{esc(name)} is a host: taken as --host {esc(name)}[/dim]")
        else:
            raise UsageError(
                f"no service named {name!r}",
                hint=f"services: {', '.join(sorted(fleet.services)) or '(none)'}; "
                "hosts are named with --host",
            )
    for host in wanted:
        if host not in fleet.hosts:
            raise UsageError(
                f"no host named {host!r}",
                hint=f"known hosts: {', '.join(sorted(fleet.hosts)) or '(none)'}",
            )
    wanted += [unit_service(fleet, name).host for name in services]
    return services, list(dict.fromkeys(wanted))


def resolve_fleet(
    path: Path | None, out: Output | None = None, *, example: bool = False, last_up: bool = False
) -> LoadedFleet:
    """The fleet a verb works on: ``path``, else the discovered fleet file.

    With ``example`` (``up`` and ``show`` only) a directory without a fleet
    file gets the embedded example, said so on stderr. With ``last_up`` (the
    verbs that follow an ``up``: status, down, logs, probe, bench) it gets the
    fleet ``up`` last ran on this machine (deploy.last_up), said so on
    stderr. Otherwise: a usage error (exit 2) with the fix.
    """
    from inferfleet.fleetfile.discover import FLEET_FILE_NAME
    from inferfleet.fleetfile.loader import load_fleet

    located = fleet_file(path, out)
    if located is not None:
        return load_fleet(located)
    if last_up:
        from inferfleet.deploy.last_up import recall

        record = recall()
        if record is not None:
            if out is not None:
                what = "the embedded example fleet" if record.example else esc(record.file)
                out.note(
                    f"[dim]no {FLEET_FILE_NAME} here or in a parent directory: using "
                    f"{what}, which `inferfleet up` last ran on this machine[/dim]"
                )
            return load_fleet(Path(record.file))
    if not example:
        raise no_fleet_file()
    if out is not None:
        out.note(
            f"[dim]no {FLEET_FILE_NAME} here or in a parent directory: "
            "using the embedded example fleet[/dim]"
        )
    return load_fleet(embedded_example())


def validate(
    file: Path | None = FileArg, file_opt: Path | None = FleetOpt, json_out: bool = JsonOpt
) -> None:
    """Check a fleet file: YAML, schema and cross-references. Exit 2 when invalid."""
    from inferfleet.documents import FleetCounts, ValidateDocument, ValidationIssue
    from inferfleet.fleetfile.loader import load_fleet

    out = Output(json_mode=json_out)
    target = fleet_file(one_file(file, file_opt), out)
    if target is None:
        raise no_fleet_file()
    try:
        loaded = load_fleet(target)
    except SpecError as exc:
        if json_out:
            errors = getattr(exc, "errors", [exc])
            out.emit(
                ValidateDocument(
                    schema="inferfleet.validate/v1",
                    file=str(target),
                    valid=False,
                    errors=[
                        ValidationIssue(
                            line=e.line, column=e.column, message=e.message, hint=e.hint
                        )
                        for e in errors
                    ],
                )
            )
            raise typer.Exit(exc.exit_code) from None
        raise
    fleet = loaded.fleet
    counts = FleetCounts(
        hosts=len(fleet.hosts),
        runtimes=len(fleet.runtimes),
        models=len(fleet.models),
        services=len(fleet.services),
    )
    if json_out:
        out.emit(
            ValidateDocument(
                schema="inferfleet.validate/v1",
                file=str(target),
                valid=True,
                errors=[],
                counts=counts,
            )
        )
        return
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    out.line(f"[green]ok[/green] {esc(target)}: {summary}")


def show(
    service: str | None = typer.Argument(None, help="One service, in full."),
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Show the fleet, or one service with the exact argv it runs."""
    from inferfleet.fleetfile.quantities import format_duration

    out = Output(json_mode=json_out)
    loaded = resolve_fleet(file, out, example=True)
    fleet = loaded.fleet
    if service is None:
        _show_fleet(out, loaded)
        return
    if service not in fleet.services and service not in fleet.groups:
        raise UsageError(
            f"no service named {service!r} in {loaded.path}",
            hint=f"known services: {', '.join(sorted(fleet.services)) or '(none)'}",
        )
    detail = service_detail(loaded, service)
    if json_out:
        out.emit(detail)
        return
    svc = unit_service(fleet, service)
    grouped = list(members(fleet, service)) if service in fleet.groups else []
    rows = [["members", esc(", ".join(grouped))]] if grouped else []
    if svc.group is not None:
        rows.append(["group", f"{esc(svc.group)} (its preset carries the flags below)"])
    rows += [
        ["host", esc(svc.host)],
        ["kind", svc.kind],
        ["runtime", esc(svc.runtime or "-")],
        ["model", esc(svc.model or svc.image or "-")],
        ["alias", esc(svc.model_id(service))],
        ["listen", f"{svc.bind}:{svc.port}"],
        ["context", f"{svc.ctx_per_slot} per slot x {svc.parallel} slots = {svc.ctx_total}"],
        ["kv cache", f"K {svc.kv_cache.k}, V {svc.kv_cache.v}"],
        ["backend", svc.backend],
        ["health", f"{svc.health.path} within {format_duration(svc.health.timeout)}"],
    ]
    if grouped:
        # A router serves each member with its own model, window and caches (its preset).
        per_member = {"model", "alias", "context", "kv cache"}
        rows = [row for row in rows if row[0] not in per_member]
    out.table(f"service {esc(service)}", ["", ""], rows)
    if "argv" in detail:
        out.line("argv:\n  " + esc(format_argv(detail["argv"])))


def format_argv(argv: list[str]) -> str:
    """One flag and its value per line, shell-quoted, ready to paste."""
    lines: list[list[str]] = [[argv[0]]]
    for arg in argv[1:]:
        previous = lines[-1]
        takes_value = len(lines) > 1 and len(previous) == 1 and previous[0].startswith("-")
        if takes_value and not arg.startswith("-"):
            previous.append(arg)
        else:
            lines.append([arg])
    return " \\\n    ".join(shlex.join(line) for line in lines)


def service_detail(loaded: LoadedFleet, name: str) -> ShowServiceDocument:
    """A service's resolved facts, computed without side effects."""
    fleet = loaded.fleet
    svc = unit_service(fleet, name)
    # Imported here: validate, schema and init need none of the launch machinery.
    from inferfleet.deploy.facts import host_facts
    from inferfleet.documents import ShowServiceDocument
    from inferfleet.render.facts import facts_for
    from inferfleet.render.pipeline import service_launch

    if fleet.hosts[svc.host].is_local(svc.host):
        facts = host_facts(loaded.root)
    else:
        facts = facts_for(fleet, fleet_subdir=loaded.repo_subdir)[svc.host]
    # The one launch pipeline: exactly what up / apply run and render writes.
    from inferfleet.deploy.rpc import shape_reader

    launch = service_launch(
        fleet, loaded.root, name, facts, shape_of=shape_reader(fleet, loaded.path)
    )
    data = ShowServiceDocument(
        schema="inferfleet.show/v1",
        file=str(loaded.path),
        service=name,
        spec=svc.model_dump(mode="json"),
        ctx_total=svc.ctx_total,
        argv=launch.argv,
        spec_digest=launch.spec,
    )
    if launch.image is not None:
        data["image"] = launch.image
    if launch.model_files:
        data["model_bytes"] = sum(f.size for f in launch.model_files if f.model == svc.model)
    return data


def _show_fleet(out: Output, loaded: LoadedFleet) -> None:
    from inferfleet.documents import ShowFleetDocument
    from inferfleet.fleetfile.quantities import format_size

    fleet = loaded.fleet
    if out.json_mode:
        out.emit(
            ShowFleetDocument(
                schema="inferfleet.show/v1",
                file=str(loaded.path),
                fleet=fleet.model_dump(mode="json"),
            )
        )
        return
    host_rows = []
    for name, host in fleet.hosts.items():
        devices = ", ".join(
            f"{d.name} ({d.vendor}, {format_size(d.memory)}"
            + (", unified)" if d.unified_memory else ")")
            for d in host.devices
        )
        host_rows.append([esc(name), esc(host.address or name), esc(devices or "-")])
    out.table(f"hosts ({esc(loaded.path)})", ["host", "address", "devices"], host_rows)
    rows = []
    for name, svc in fleet.services.items():
        rows.append(
            [
                esc(name),
                esc(svc.host),
                esc(svc.model or svc.image or "-"),
                f"{svc.bind}:{svc.port}",
                f"{svc.ctx_per_slot or '-'} x {svc.parallel}",
                svc.backend,
            ]
        )
    out.table(
        "services", ["service", "host", "model", "listen", "ctx/slot x slots", "backend"], rows
    )


def schema(indent: int = typer.Option(2, help="JSON indentation.")) -> None:
    """Print the fleet file's JSON Schema (for editor validation and completion)."""
    from inferfleet.fleetfile.fleet import Fleet

    doc = Fleet.model_json_schema(mode="validation")
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["$id"] = "inferfleet.fleet/v1"
    doc["title"] = "inferfleet fleet file, version 1"
    typer.echo(json.dumps(doc, indent=indent))


GITIGNORE_LINES = (
    "# inferfleet: secrets live in untracked env files (L-55)",
    "*.env",
    "secrets/",
)


# What `init` writes besides .gitignore: (path in the repository, packaged template).
# The CI files run `inferfleet check --strict` (pre-commit on commit, the workflow in CI).
def _git_init(directory: Path) -> bool:
    """``git init`` in ``directory`` unless it is already inside a work tree; True if it ran.

    Without git on this machine nothing is run: the scaffold is complete either way, and
    ``plan``/``deploy`` say that they need a repository when they are used."""
    import shutil

    from inferfleet.io import process

    if shutil.which("git") is None:
        return False
    inside = process.run(
        ["git", "-C", str(directory), "rev-parse", "--is-inside-work-tree"],
        check=False,
        timeout=30,
    )
    if inside.returncode == 0:
        return False
    process.run(["git", "init", "-q", str(directory)], timeout=60)
    return True


SCAFFOLD: tuple[tuple[str, str], ...] = (
    ("fleet.yaml", "examples/local/fleet.yaml"),
    (".pre-commit-config.yaml", "examples/ci/pre-commit-config.yaml"),
    (".github/workflows/inferfleet-check.yml", "examples/ci/inferfleet-check.yml"),
)


def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the fleet repository."),
    force: bool = typer.Option(
        False, "--force", help="Overwrite existing files (fleet.yaml and the CI files)."
    ),
    ci: bool = typer.Option(
        True,
        "--ci/--no-ci",
        help="Also write .pre-commit-config.yaml and a CI workflow that run "
        "`inferfleet check --strict`.",
    ),
    install: str | None = typer.Option(
        None,
        "--install",
        metavar="SPEC",
        help="The pip requirement CI installs inferfleet from (default: how this one was "
        "installed: its git remote at the commit, or the version from a package index).",
    ),
) -> None:
    """Scaffold a fleet repo: fleet.yaml, .gitignore, pre-commit + CI running check --strict.

    fleet.yaml comes from the embedded example; .pre-commit-config.yaml and
    .github/workflows/inferfleet-check.yml run `inferfleet check --strict`.
    """
    from inferfleet import __version__
    from inferfleet.io.files import atomic_write
    from inferfleet.origin import checked_spec, origin

    out = Output()
    source = origin()
    spec = checked_spec(install) if install is not None else source.spec
    wanted = SCAFFOLD if ci else SCAFFOLD[:1]
    targets = [(directory / name, template) for name, template in wanted]
    # Refuse before writing anything: nothing is half-scaffolded.
    for target, _ in targets:
        if target.is_dir():
            raise UsageError(f"cannot write {target}: it is a directory", hint="move it aside")
        blocked = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            raise UsageError(
                f"cannot write {target}: {blocked} is a file, not a directory",
                hint="move it aside, or pass another directory",
            )
    existing = [target for target, _ in targets if target.exists()]
    if existing and not force:
        names = ", ".join(str(t) for t in existing)
        raise UsageError(
            f"already exists: {names}",
            hint="edit them, pass --force to replace them with the templates"
            + ("" if not ci else ", or --no-ci to write only fleet.yaml"),
        )
    packaged = resources.files("inferfleet")
    for target, template in targets:
        text = packaged.joinpath(template).read_text(encoding="utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        text = text.replace("@VERSION@", __version__).replace("@INSTALL@", spec)
        atomic_write(target, text)
    ignore = directory / ".gitignore"
    present = ignore.read_text().splitlines() if ignore.exists() else []
    missing = [line for line in GITIGNORE_LINES if line not in present]
    if missing:
        with ignore.open("a") as handle:
            if present and present[-1].strip():
                handle.write("\n")
            handle.write("\n".join(missing) + "\n")
    for target, _ in targets:
        out.line(f"[green]created[/green] {esc(target)}")
    if ci and install is None and not source.reachable:
        out.note(
            f"[yellow]note:[/yellow] this inferfleet was installed {esc(source.where)}, which "
            f"CI cannot reach: its workflow installs {esc(spec)} from a package index. "
            "Pass --install SPEC (e.g. your git remote at a commit) to write another."
        )
    if _git_init(directory):
        # A fleet is a git repository: plan, deploy and rollback read its history.
        out.line(f"[green]initialised[/green] a git repository in {esc(directory)}")
    out.line("next: edit hosts, models and services; then `inferfleet validate`, `inferfleet up`")
    if ci:
        out.line(
            "CI: `pre-commit install` runs `inferfleet check --strict` on every commit; "
            "the workflow runs it on every push"
        )
