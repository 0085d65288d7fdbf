"""``inferfleet facts record``: the header facts and files of each declared model, written
under ``facts/models/`` next to the fleet file, so a checkout without the model files
(CI) judges what the host that has them would.

Each record is keyed by the main file's sha256 (declared, stated by the source, or
hashed here): when the file changes, ``check`` and ``budget`` no longer use the record
and say why. The header is read where ``check`` reads it (this machine's file, the
installed package, the Hub by range requests); ``--offline`` (or ``HF_HUB_OFFLINE=1``)
records only what needs no request.

Exit codes: 0 every GGUF model recorded; 1 a model could not be recorded (the
reason is printed; the others are written); 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

import typer

from inferfleet.artifacts.digests import file_digests
from inferfleet.artifacts.hfconfig import MAX_CONFIG_BYTES
from inferfleet.artifacts.locate import main_file, model_dir
from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.st_model import CONFIG, is_safetensors_model
from inferfleet.bounded import read_bounded
from inferfleet.budget import DEFAULT_HEADROOM, MIB
from inferfleet.budget.measured import from_reports
from inferfleet.budget.memreport import BootReport, parse_log
from inferfleet.cli.budget_cmd import build_request
from inferfleet.cli.fleet_cmds import FileArg, FleetOpt, one_file, resolve_fleet
from inferfleet.errors import EXIT_FAILED, FleetError, UsageError
from inferfleet.facts.boots import FORMAT, MAX_BOOTS, RecordedBoots, write_boots
from inferfleet.fleetfile.fleet import HubSource, PathSource
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.hub.headers import ModelSources
from inferfleet.hub.recorded import RECORDED, RecordedFile, facts_path, folder_key, write_recorded
from inferfleet.hub.st_headers import hub_reader, write_cached
from inferfleet.output import Output, esc

app = typer.Typer(
    no_args_is_help=True,
    help="Record models' header facts in the fleet repo (facts/) for checks without the files.",
)


@app.command("record")
def record(
    file: Path | None = FileArg,
    file_opt: Path | None = FleetOpt,
    model: list[str] = typer.Option([], "--model", help="Only this model (repeatable)."),
    offline: bool = typer.Option(False, "--offline", help="No network request."),
    from_log: list[str] = typer.Option(
        [],
        "--from-log",
        metavar="SERVICE=LOG",
        help="A llama-server boot log of SERVICE (once or twice): its measured memory, "
        "recorded under facts/services/ (L-27).",
    ),
    host: list[str] = typer.Option(
        [],
        "--host",
        help="Record this host's GPUs as `doctor` discovers them (over ssh for a remote "
        "host) under facts/hosts/, for `check` (repeatable; only hosts are recorded).",
    ),
) -> None:
    """Record each model's header facts and files under facts/models/ (keyed by sha256),
    services' measured boots under facts/services/ and hosts' GPUs under facts/hosts/."""
    out = Output()
    loaded = resolve_fleet(one_file(file, file_opt), out)
    if host:
        _record_hosts(loaded, host, out)
        return
    names = model or list(loaded.fleet.models)
    unknown = [n for n in names if n not in loaded.fleet.models]
    if unknown:
        raise UsageError(
            f"no model named {', '.join(repr(n) for n in unknown)} in {loaded.path}",
            hint=f"models: {', '.join(loaded.fleet.models) or 'none'}",
        )
    logs = _logs(loaded, from_log)
    failed = 0
    with ModelSources(loaded, offline=offline, use_recorded=False) as sources:
        for service, paths in logs.items():
            # Validated first: a bad log records nothing at all.
            _check_boots(loaded, sources, service, paths)
        for name in names if not logs or model else []:
            try:
                line = _record_one(loaded, sources, name)
            except FleetError as exc:
                failed += 1
                said = esc(exc.render())
                out.line(f"[bold red]not recorded[/bold red] model {esc(repr(name))}: {said}")
                continue
            out.line(line)
        for service, paths in logs.items():
            try:
                out.line(_record_boots(loaded, sources, service, paths))
            except FleetError as exc:
                failed += 1
                said = esc(exc.render())
                out.line(f"[bold red]not recorded[/bold red] service {esc(repr(service))}: {said}")
    if failed:
        raise typer.Exit(EXIT_FAILED)


def _record_one(loaded: LoadedFleet, sources: ModelSources, name: str) -> str:
    model = loaded.fleet.models[name]
    declared = declared_files(model, loaded.root)
    main = main_file(model, declared, name=name)
    if main is None:
        return _record_folder(loaded, sources, name)
    header = sources.header(name)
    if isinstance(header, str):
        raise FleetError(header, hint="record where the file is (its host), or reach its source")
    listing = sources.source_files(name)
    stated = {} if isinstance(listing, str) else listing.files
    here = model_dir(name, model)
    files: dict[str, RecordedFile] = {}
    for entry in declared:
        found = stated.get(entry.path)
        sha = entry.sha256 or (found.sha256 if found is not None else None)
        size = found.size if found is not None else entry.size
        if sha is None and entry.path == main and (here / main).is_file():
            sha = file_digests(here / main, size=(here / main).stat().st_size).sha256
        files[entry.path] = RecordedFile(size, sha)
    key = files[main].sha256 if main in files else None
    if key is None:
        raise FleetError(
            f"no sha256 for {main}: the fleet declares none and its source states none",
            hint="declare the file's sha256, or record on the host that has the file",
        )
    if isinstance(model.source, PathSource) and (here / main).is_file():
        origin = f"this machine's {here / main}"
    elif isinstance(listing, str):
        origin = "its source"
    else:
        origin = listing.source
    where = write_recorded(loaded.root, name, main, key, header, files, origin)
    return (
        f"recorded model {esc(repr(name))}: {esc(str(where.relative_to(loaded.root)))} "
        f"(sha256 {key[:12]}..., {len(header.tensors)} tensors, from {esc(origin)})"
    )


def _logs(loaded: LoadedFleet, given: list[str]) -> dict[str, list[Path]]:
    logs: dict[str, list[Path]] = {}
    for text in given:
        service, sep, path = text.partition("=")
        if not sep or not service or not path:
            raise UsageError(f"--from-log {text!r}: expected SERVICE=LOG")
        found = loaded.fleet.services.get(service)
        if found is None or found.runtime is None or found.model is None:
            raise UsageError(
                f"--from-log {text!r}: no llm service named {service!r}",
                hint=f"services: {', '.join(loaded.fleet.services)}",
            )
        if loaded.fleet.runtimes[found.runtime].kind != "llama.cpp":
            raise UsageError(f"--from-log {text!r}: {service!r} is not a llama.cpp service")
        logs.setdefault(service, []).append(Path(path))
    for service, paths in logs.items():
        if len(paths) > MAX_BOOTS:
            raise UsageError(f"--from-log: {len(paths)} logs of {service!r}; give one or two")
    return logs


def _measured(
    loaded: LoadedFleet, sources: ModelSources, service: str, paths: list[Path]
) -> tuple[list[BootReport], str]:
    """The logs parsed and checked against the service (the calibration they give)."""
    model = loaded.fleet.services[service].model
    assert model is not None
    sha = sources.model_sha256(model)
    if sha is None:
        raise FleetError(
            f"the sha256 of model {model!r} is not known: the boots would not say which file "
            "they measured",
            hint="declare the main file's sha256, or record the model's facts first",
        )
    reports = [parse_log(path) for path in paths]
    request = build_request(loaded, sources, service, ctx=None, headroom_mib=DEFAULT_HEADROOM / MIB)
    from_reports(request, reports)  # refuses logs that do not fit the service (BudgetError)
    return reports, sha


def _check_boots(
    loaded: LoadedFleet, sources: ModelSources, service: str, paths: list[Path]
) -> None:
    try:
        _measured(loaded, sources, service, paths)
    except FleetError as exc:
        raise UsageError(
            f"--from-log of service {service!r}: {exc.message}", hint=exc.hint
        ) from None


def _record_boots(
    loaded: LoadedFleet, sources: ModelSources, service: str, paths: list[Path]
) -> str:
    reports, sha = _measured(loaded, sources, service, paths)
    model = loaded.fleet.services[service].model
    assert model is not None
    where = write_boots(loaded.root, RecordedBoots(FORMAT, service, model, sha, tuple(reports)))
    return (
        f"recorded service {esc(repr(service))}: {esc(str(where.relative_to(loaded.root)))} "
        f"({len(reports)} boot(s), model sha256 {sha[:12]}...)"
    )


def _record_folder(loaded: LoadedFleet, sources: ModelSources, name: str) -> str:
    """A safetensors model (vLLM/SGLang): its config.json and weight headers."""
    model = loaded.fleet.models[name]
    declared = declared_files(model, loaded.root)
    if not is_safetensors_model([e.path for e in declared]):
        raise FleetError(f"model {name!r} is neither a GGUF nor a safetensors folder")
    key = folder_key(declared)
    if key is None:
        raise FleetError(
            "a declared file has no sha256, so a record could not be matched to the files",
            hint="declare the files with their sha256 (`inferfleet models manifest`)",
        )
    found = sources.safetensors(name)
    if isinstance(found, str):
        raise FleetError(found, hint="record where the files are, or reach their source")
    folder = model_dir(name, model)
    if (folder / CONFIG).is_file():
        config = read_bounded(
            folder / CONFIG, MAX_CONFIG_BYTES, what="config.json", error=FleetError
        )
        origin = f"this machine's {folder}"
    elif isinstance(model.source, HubSource) and sources.offline:
        raise FleetError(
            f"model {name!r}: its config.json is read from the Hub, and --offline (or "
            "HF_HUB_OFFLINE) allows no request",
            hint="drop --offline, or record where the files are",
        )
    elif isinstance(model.source, HubSource):
        reader = hub_reader(
            sources.endpoint_url, model.source.hub, model.source.revision, sources.http
        )
        config = reader.small(CONFIG, MAX_CONFIG_BYTES)
        origin = f"hub {model.source.hub}@{model.source.revision}"
    else:
        raise FleetError(f"model {name!r}: its config.json is not on this machine")
    where = facts_path(loaded.root, name)
    where.parent.mkdir(parents=True, exist_ok=True)
    if not write_cached(where, RECORDED, name, key, config, found):
        raise FleetError(f"model {name!r}: its headers could not be recorded ({where})")
    return (
        f"recorded model {esc(repr(name))}: {esc(str(where.relative_to(loaded.root)))} "
        f"({len(found.files)} weight file(s), from {esc(origin)})"
    )


def _record_hosts(loaded: LoadedFleet, hosts: list[str], out: Output) -> None:
    """Each host's GPU discovery (``doctor``'s, read there) under facts/hosts/."""
    from inferfleet.cli.doctor_cmd import examine
    from inferfleet.doctor.parse import Facts
    from inferfleet.facts.hosts import FORMAT as HOST_FORMAT
    from inferfleet.facts.hosts import RecordedHost, write_host

    unknown = [h for h in hosts if h not in loaded.fleet.hosts]
    if unknown:
        raise UsageError(
            f"no host named {', '.join(repr(h) for h in unknown)} in {loaded.path}",
            hint=f"hosts: {', '.join(loaded.fleet.hosts) or 'none'}",
        )
    for name in dict.fromkeys(hosts):
        facts = Facts.from_json(examine(loaded, name, [])["facts"])
        record = RecordedHost(
            HOST_FORMAT, name, facts.gpu_source, tuple(facts.gpus), tuple(facts.gpu_notes)
        )
        where = write_host(loaded.root, record)
        found = ", ".join(f"{g.vendor}:{g.index} {g.name}" for g in facts.gpus) or "no GPU"
        out.line(
            f"recorded host {esc(repr(name))}: {esc(str(where.relative_to(loaded.root)))} "
            f"({esc(found)}; from {esc(facts.gpu_source or 'no GPU tool')})"
        )
