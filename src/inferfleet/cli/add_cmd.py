"""``inferfleet add REPO[:FILE|:TAG][@REV] --host HOST``: a Hub model and its service, one step.

The manifest is listed on the Hub (sizes, sha256, the revision pinned to its
commit, every part of a split quant, L-04/L-09), the model block carries
those files inline, the service block gets the host's llama.cpp runtime,
the next free port on the host and the window asked for (``--ctx`` per slot
x ``--parallel``, L-25). The fleet file is edited in place, comments kept;
``check`` runs on the result and the file is written (atomically) only when
it passes. ``--dry-run`` prints the diff instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from inferfleet.cli.edits import write_checked
from inferfleet.cli.fleet_cmds import FleetOpt, OfflineOpt, fleet_file, no_fleet_file, verb_output
from inferfleet.errors import HTTPError, UsageError
from inferfleet.fleetfile.fleet import Host
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.hub.errors import HubError
from inferfleet.output import esc

FIRST_PORT = 8080
FIT_HEADROOM_MIB = 1024  # what `budget` keeps free per device by default
SOLVE_STEP = 4096  # a placeholder window while the solver runs (it searches its own)


def add(
    ref_text: str = typer.Argument(
        ...,
        metavar="REPO[:FILE|:TAG][@REV]",
        help="A Hub repo and the GGUF (a file or a quant tag).",
    ),
    host: str = typer.Option(..., "--host", help="The host of the fleet file that serves it."),
    name: str | None = typer.Option(None, "--name", help="Service (and model) name."),
    ctx: int | None = typer.Option(None, "--ctx", min=256, help="Context window per slot (L-25)."),
    fit: bool = typer.Option(
        False, "--fit", help="The largest window per slot that fits the host's devices (L-27)."
    ),
    parallel: int = typer.Option(1, "--parallel", min=1, max=256, help="Slots."),
    port: int | None = typer.Option(None, "--port", min=1, max=65535, help="Default: next free."),
    runtime: str | None = typer.Option(None, "--runtime", help="A llama.cpp runtime of the fleet."),
    file_opt: Path | None = FleetOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff, write nothing."),
    offline: bool = OfflineOpt,
) -> None:
    """Add a Hub model and a service for it (manifest pinned, checked, comments kept)."""
    out = verb_output(offline)
    from inferfleet.fleetfile.loader import load_fleet, parse_fleet
    from inferfleet.hub.auth import resolve_token
    from inferfleet.hub.fetch_plan import endpoint
    from inferfleet.hub.manifest import build_manifest
    from inferfleet.hub.model_ref import manifest_globs, parse_ref
    from inferfleet.importers.fleetedit import merge
    from inferfleet.importers.llamacpp import model_name
    from inferfleet.importers.result import Imported, ImportedService, Where

    file = fleet_file(file_opt, out)
    if file is None:
        raise no_fleet_file()
    loaded = load_fleet(file)
    fleet = loaded.fleet
    if host not in fleet.hosts:
        raise UsageError(
            f"host {host!r} is not in {file}", hint=f"hosts: {', '.join(sorted(fleet.hosts))}"
        )
    ref = parse_ref(ref_text)
    if ref is None or (ref.path is None and ref.tag is None):
        raise UsageError(
            f"{ref_text!r} does not name one GGUF of a Hub repo",
            hint="write OWNER/NAME:FILE.gguf or OWNER/NAME:TAG (a quant, e.g. Q4_K_M)",
        )
    if (ctx is None) == (not fit):
        raise UsageError("give the window per slot: --ctx N, or --fit (the largest that fits)")
    runtime_name = _runtime(fleet.runtimes, runtime, file)
    try:
        made = build_manifest(
            endpoint=endpoint(None),
            repo=ref.repo,
            revision=ref.revision,
            includes=manifest_globs(ref),
            token=resolve_token(token_file=None),
            on_note=out.note,
        )
    except (HubError, HTTPError) as exc:
        if isinstance(exc, HTTPError) and exc.status not in (401, 403, 404):
            raise  # the Hub did not answer: an operation that failed, as it says
        raise UsageError(
            f"{ref_text}: {exc.message}",
            hint="`inferfleet models manifest OWNER/NAME` lists the repo's files",
        ) from None
    files = [e for e in made.entries if e.path.endswith(".gguf")]
    if not files:
        raise UsageError(f"no GGUF of {ref.repo}@{ref.revision} matches {ref.path or ref.tag}")
    service_name = name or model_name(f"{ref.repo.split('/')[-1]}-{ref.tag or ''}".rstrip("-"))
    model: dict[str, Any] = {
        "source": {"hub": ref.repo, "revision": made.commit or ref.revision},
        "files": [_file(e.path, e.size, e.kind, e.value) for e in files],
    }
    used = {s.port for s in fleet.services.values() if s.host == host}
    chosen = (
        port if port is not None else next(p for p in range(FIRST_PORT, 65536) if p not in used)
    )
    devices = _devices(fleet.hosts[host])
    where = Where(f"{ref.repo}@{made.commit or ref.revision}")

    def with_window(window: int) -> tuple[str, LoadedFleet]:
        block: dict[str, Any] = {
            "host": host,
            "runtime": runtime_name,
            "model": service_name,
            "port": chosen,
            "ctx_per_slot": window,
            "parallel": parallel,
        }
        if devices:
            block["devices"] = devices
        imported = Imported(host=host)
        imported.models[service_name] = model
        imported.services[service_name] = ImportedService(service_name, block, [], where)
        text = merge(loaded.source, imported, origin=ref_text, file=str(file), verb="added")
        return text, LoadedFleet(parse_fleet(text, file), loaded.path, text)

    if ctx is None:
        ctx = _fit(with_window(SOLVE_STEP)[1], service_name, host)
        out.line(f"--fit: {ctx} tokens per slot x {parallel} fit the devices of {esc(host)}")
    text = with_window(ctx)[0]
    if not write_checked(loaded, text, out, dry_run=dry_run, what=f"with {service_name}"):
        return
    total = sum(f["size"] for f in model["files"])
    out.line(
        f"[green]added[/green] {esc(service_name)} to {esc(file)}: {len(files)} file(s), "
        f"{total} bytes at {esc(ref.repo)}@{esc(made.commit or ref.revision)}, port {chosen}, "
        f"{ctx} per slot x {parallel}"
    )


def _devices(host: Host) -> list[str]:
    """The service's devices: the host's accelerators, else its CPU devices."""
    gpus = [d.name for d in host.devices if d.vendor != "cpu"]
    return gpus or [d.name for d in host.devices if d.vendor == "cpu"]


def _fit(loaded: LoadedFleet, name: str, host: str) -> int:
    """The largest window per slot that fits (the budget solver over the model's header)."""
    from inferfleet.budget import solve
    from inferfleet.cli.budget_cmd import build_request
    from inferfleet.hub.headers import ModelSources

    if not loaded.fleet.hosts[host].devices:
        raise UsageError(
            f"--fit sizes for the devices of host {host!r}, which declares none",
            hint=f"declare them under hosts.{host}.devices (`inferfleet doctor {host}`), or "
            "give --ctx",
        )
    with ModelSources(loaded) as sources:
        request = build_request(loaded, sources, name, ctx=None, headroom_mib=FIT_HEADROOM_MIB)
        solution = solve(request)
    if solution.ctx_per_slot is None:
        raise UsageError(
            f"{name} does not fit the devices of host {host!r}: {solution.limit}",
            hint="pick a smaller quant, fewer --parallel slots, or another host",
        )
    return solution.ctx_per_slot


def _file(path: str, size: int, kind: str, value: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path, "size": size}
    if kind == "sha256":
        entry["sha256"] = value
    return entry


def _runtime(runtimes: dict[str, Any], wanted: str | None, file: Path) -> str:
    llama = [n for n, r in runtimes.items() if r.kind == "llama.cpp"]
    if wanted is not None:
        if wanted not in llama:
            raise UsageError(
                f"{wanted!r} is not a llama.cpp runtime of {file}",
                hint=f"llama.cpp runtimes: {', '.join(llama) or '(none)'}",
            )
        return wanted
    if len(llama) != 1:
        raise UsageError(
            f"{file} has {len(llama)} llama.cpp runtimes",
            hint="name one with --runtime" if llama else "declare one under runtimes: first",
        )
    return llama[0]
