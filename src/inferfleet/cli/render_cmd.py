"""``inferfleet render``, ``diff`` and ``render-settings``.

``render`` refuses a fleet that ``check`` fails (a unit that repeats a known
incident is not worth installing); ``--no-check`` renders anyway. ``diff``
exits 1 when the rendered artifacts would change a previous render, like
``diff(1)``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from inferfleet import paths
from inferfleet.checks.engine import run_checks
from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, resolve_fleet
from inferfleet.cli.render_files import write_bundle, write_settings
from inferfleet.documents import DiffChange, DiffDocument, RenderDocument, RenderedFile
from inferfleet.errors import EXIT_FAILED, UsageError
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.install import runtime_flags
from inferfleet.output import Output, esc
from inferfleet.render.bundle import Artifact, diff_bundle, render_fleet
from inferfleet.render.facts import FACT_KEYS, load_facts
from inferfleet.render.settings import render_service_settings

ServiceArg = typer.Argument(None, help="Only this service's artifacts (default: all).")
OutOpt = typer.Option(..., "--out", "-o", help="Directory of rendered artifacts.")
TargetOpt = typer.Option(
    "hosts",
    "--target",
    help="hosts: units, env files, monitoring and client configs for the SSH hosts; "
    "kubernetes: manifests and a kustomization for a cluster (needs kubernetes: in the fleet); "
    "llama-swap: a llama-swap config.yaml per host (one model per service).",
)
NamespaceOpt = typer.Option(
    None, "--namespace", help="kubernetes: the namespace (default: kubernetes.namespace)."
)
FactsOpt = typer.Option(
    None,
    "--facts",
    help=f"YAML of host facts per host: {', '.join(FACT_KEYS)} (default: derived from the "
    "fleet file; a rootful Quadlet front door needs uid and gid).",
)


def _check(loaded: LoadedFleet) -> None:
    """Refuse a fleet that fails `check` (render's default)."""
    report = run_checks(loaded, flags=runtime_flags.flag_source())
    if report.errors:
        first = report.errors[0]
        raise UsageError(
            f"the fleet fails {len(report.errors)} check rule(s), first {first.rule} "
            f"({first.lesson}): {first.message}",
            where=str(loaded.path),
            hint="run `inferfleet check` for all of them and fix them (or --no-check)",
        )


def _artifacts(
    loaded: LoadedFleet, service: str | None, facts: Path | None, check: bool
) -> list[Artifact]:
    if check:
        _check(loaded)
    overrides = None if facts is None else load_facts(facts, loaded.fleet, loaded.repo_subdir)
    from inferfleet.deploy.rpc import shape_reader  # a split service's layers (its header)

    return render_fleet(loaded, service, overrides, shape_reader(loaded.fleet, loaded.path))


def render(
    service: str | None = ServiceArg,
    out_dir: Path = OutOpt,
    file: Path | None = FleetOpt,
    facts: Path | None = FactsOpt,
    no_check: bool = typer.Option(False, "--no-check", help="Render even if check fails."),
    target: str = TargetOpt,
    namespace: str | None = NamespaceOpt,
    json_out: bool = JsonOpt,
    offline: bool = typer.Option(
        False, "--offline", help="No network request (model headers from here or the cache)."
    ),
) -> None:
    """Write every artifact (units, env files, monitoring, client configs) to --out."""
    from inferfleet.io.offline import offline_mode

    with offline_mode(offline):
        _render(service, out_dir, file, facts, no_check, target, namespace, json_out)


def _render(
    service: str | None,
    out_dir: Path,
    file: Path | None,
    facts: Path | None,
    no_check: bool,
    target: str,
    namespace: str | None,
    json_out: bool,
) -> None:
    out = Output(json_mode=json_out)
    if target not in {"hosts", "kubernetes", "llama-swap"}:
        raise UsageError(f"unknown --target {target!r}", hint="use hosts, kubernetes or llama-swap")
    if target != "kubernetes" and namespace is not None:
        raise UsageError("--namespace is for --target kubernetes")
    loaded = resolve_fleet(file, out)
    if target == "kubernetes":
        if service is not None or facts is not None:
            raise UsageError(
                "--target kubernetes renders the whole fleet for a cluster; "
                "a SERVICE and --facts are for the hosts"
            )
        if not no_check:
            _check(loaded)
        artifacts = _kube_artifacts(out, loaded, namespace)
    elif target == "llama-swap":
        if not no_check:
            _check(loaded)
        if service is not None:
            raise UsageError(
                "--target llama-swap renders one config per host with every service of it; "
                "a SERVICE is for --target hosts"
            )
        artifacts = _llama_swap_artifacts(out, loaded, facts)
    else:
        artifacts = _artifacts(loaded, service, facts, not no_check)
    write_bundle(artifacts, out_dir, only=service)
    if json_out:
        out.emit(
            RenderDocument(
                schema="inferfleet.render/v1",
                file=str(loaded.path),
                out=str(out_dir),
                files=[
                    RenderedFile(path=a.path, kind=a.kind, sha256=a.sha256, install=a.install)
                    for a in artifacts
                ],
            )
        )
        return
    rows = [[esc(a.path), a.kind, esc(a.install or "-")] for a in artifacts]
    out.table(f"rendered into {esc(out_dir)}", ["file", "kind", "installs to"], rows)


def _kube_artifacts(out: Output, loaded: LoadedFleet, namespace: str | None) -> list[Artifact]:
    """The cluster's manifests, with memory requests where the budget can size them."""
    from inferfleet.hub.headers import ModelSources
    from inferfleet.render.kube.bundle import render_kubernetes
    from inferfleet.render.kube.memory import memory_requests

    with ModelSources(loaded) as sources:
        sized, unsized = memory_requests(
            loaded.fleet, loaded.root, sources.header, sources.safetensors
        )
    for name, reason in unsized.items():
        out.note(f"no memory request for {esc(name)}: {esc(reason)}")
    return render_kubernetes(loaded, namespace, sized)


def _llama_swap_artifacts(out: Output, loaded: LoadedFleet, facts: Path | None) -> list[Artifact]:
    """One llama-swap config per host that has services."""
    from inferfleet.render.facts import facts_for
    from inferfleet.render.llamaswap import render_llama_swap

    fleet = loaded.fleet
    overrides = None if facts is None else load_facts(facts, fleet, loaded.repo_subdir)
    by_host = facts_for(fleet, overrides, fleet_subdir=loaded.repo_subdir)
    used = {s.host for s in fleet.services.values()}
    artifacts = []
    for name in sorted(used):
        config = render_llama_swap(fleet, loaded.root, name, by_host[name], origin=loaded.path.name)
        for note in config.notes:
            out.note(f"note: {esc(note)}")
        if config.text:
            path = f"llama-swap/{name}/config.yaml"
            artifacts.append(Artifact(path, config.text, "llama-swap", host=name))
    if not artifacts:
        raise UsageError(
            "no host has a service llama-swap can start",
            hint="llama-swap starts llm services that run as processes on their host",
        )
    return artifacts


def diff(
    service: str | None = ServiceArg,
    out_dir: Path = OutOpt,
    file: Path | None = FleetOpt,
    facts: Path | None = FactsOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Show what `render` would change in a directory of previously rendered artifacts."""
    out = Output(json_mode=json_out)
    loaded = resolve_fleet(file, out)
    artifacts = _artifacts(loaded, service, facts, check=False)
    changes = diff_bundle(artifacts, out_dir, only=service)
    if json_out:
        out.emit(
            DiffDocument(
                schema="inferfleet.diff/v1",
                out=str(out_dir),
                changes=[DiffChange(path=c.path, status=c.status, diff=c.diff) for c in changes],
            )
        )
    elif not changes:
        out.line(f"no changes against {esc(out_dir)}")
    else:
        for change in changes:
            out.line(f"[bold]{change.status}[/bold] {esc(change.path)}")
            if out.human:
                out.console.print(change.diff, markup=False, highlight=False, end="")
    if changes:
        raise typer.Exit(EXIT_FAILED)


def render_settings(
    service: str = typer.Argument(..., help="The service whose settings files to render."),
    env_file: list[Path] = typer.Option(
        [], "--env-file", help="Env file with the values (default: the service's env_files)."
    ),
    dest_root: Path | None = typer.Option(
        None, "--dest-root", help="Prefix for every destination (staging, tests)."
    ),
    file: Path | None = FleetOpt,
) -> None:
    """Render a service's third-party settings files from env files (L-54), on the host."""
    out = Output()
    loaded = resolve_fleet(file, out)
    svc = loaded.fleet.services.get(service)
    if svc is None:
        raise UsageError(
            f"no service named {service!r} in {loaded.path}",
            hint=f"known services: {', '.join(sorted(loaded.fleet.services)) or '(none)'}",
        )
    if not svc.settings:
        raise UsageError(f"service {service!r} has no settings files")
    from inferfleet.deploy.facts import host_facts

    # The same rendering apply does on the host; only the writing differs (--dest-root).
    rendered = render_service_settings(
        service,
        svc,
        host_facts(loaded.root),
        env_files=env_file or None,
        forbidden=[loaded.root],
    )
    for item in rendered:
        dest = Path(item.dest)
        if dest_root is not None:
            dest = dest_root / item.dest.lstrip("/")
        changed = write_settings(
            dest,
            item.content,
            repo_root=loaded.root,
            service=service,
            state_dir=paths.state_dir(loaded.fleet.hosts[svc.host]),
        )
        out.line(f"{'wrote' if changed else 'unchanged'} {esc(dest)}")
