"""One command line (and its environment) into a service block: what every importer shares.

The program decides the runtime (:func:`inferfleet.importers.commandline.identify`),
its flags are read with the runtime adapter's own table, the model file
becomes a model block, the runtime a runtime block (one per distinct
binary or image), and the environment is sorted: secrets are never copied
(a ``secrets_env`` reference instead, L-06/L-55), variables a runtime or
driver reads itself go to ``runtime_env`` (L-24), the rest to ``env``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferfleet.artifacts.digests import file_digests
from inferfleet.fleetfile.fleet import Host
from inferfleet.importers import commandline
from inferfleet.importers.engines import ENGINES, FilesOf, local_files, read_engine
from inferfleet.importers.llamacpp import (
    SizeOf,
    local_size,
    model_name,
    read_llama_server,
)
from inferfleet.importers.result import Imported, ImportedService, Where, free_name
from inferfleet.render.secrets import is_secret_name, runtime_owned, secret_in
from inferfleet.runtimes.registry import traits

# The order a service block is written in (as the examples write them).
BLOCK_ORDER = ("host", "runtime", "model", "alias", "group", "bind", "port", "ctx_per_slot",
               "parallel")  # fmt: skip
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class EnvItem:
    name: str
    value: str
    where: Where


@dataclass
class Source:
    """One server as another tool starts it."""

    name: str  # the service name to give it (already a fleet name)
    words: list[str]  # its command line, every macro or variable resolved
    where: Where
    alias: str | None = None  # what clients call it, when the tool names it (llama-swap's id)
    env: list[EnvItem] = field(default_factory=list)
    image: str | None = None  # a container image runs it (its entrypoint is words[0])
    secrets_file: str | None = None  # an env file the server reads, possibly secrets
    size_of: SizeOf = local_size  # model file sizes where the server runs
    files_of: FilesOf = local_files  # a model folder's files there (vLLM, SGLang)
    local: bool = True  # the server's files are on this machine (not `import host` over ssh)


def runtime_name(out: Imported, block: dict[str, Any]) -> str:
    """The runtime of a binary or image (one per distinct block)."""
    base = {"llama.cpp": "llama-server", "vllm": "vllm"}.get(block["kind"], block["kind"])
    return _held(out.runtimes, base + ("-image" if "image" in block else ""), block)


def model_ref(out: Imported, name: str, block: dict[str, Any]) -> str:
    """One model per distinct file set; another with the same name gets a suffix."""
    return _held(out.models, name, block)


def _held(table: dict[str, dict[str, Any]], base: str, block: dict[str, Any]) -> str:
    """The name ``block`` goes by in ``table``: an equal block's, else ``base``, suffixed
    (``-2``, ``-3`` ...) when another block holds it."""
    for known, held in table.items():
        if held == block:
            return known
    name = free_name(base, table)
    table[name] = block
    return name


def read_service(
    out: Imported, source: Source, *, host_name: str, host: Host | None
) -> ImportedService | None:
    """The service block of ``source``; None (with problems recorded) when it cannot be one."""
    where = source.where
    program = commandline.identify(source.words)
    if program is None:
        first = source.words[0] if source.words else "(nothing)"
        out.problem(
            where,
            f"{source.name}: the command starts {first!r}, not a server inferfleet runs",
            "llama-server, `vllm serve`, `python -m vllm.entrypoints.openai.api_server` and "
            "`python -m sglang.launch_server` commands are imported; run other programs "
            "outside the fleet",
        )
        return None
    if source.name in out.services:
        out.problem(where, f"two servers become service {source.name!r}", "rename one of them")
        return None
    if program.kind != "llama.cpp":
        mapped = read_engine(program, where=where, out=out, files_of=source.files_of)
    else:
        mapped = read_llama_server(
            program.args, host=host, host_name=host_name, where=where, out=out,
            size_of=source.size_of,
        )  # fmt: skip
    if source.image is not None:
        runtime = {"kind": program.kind, "image": source.image}
    else:
        # A binary runtime starts its server the way its name says (runtimes.pinned.
        # BINARY_ENTRY): the `vllm` console script with `serve`, a Python with the module.
        runtime = {"kind": program.kind, "binary": program.program[0]}
        if program.kind in ENGINES and source.local:
            runtime.update(_sha256_pin(program.program[0], where, out))
    block: dict[str, Any] = {"host": host_name, "runtime": runtime_name(out, runtime)}
    block.update(mapped.fields)
    bind = block.get("bind")
    if bind is not None and bind not in LOOPBACK and source.image is None:
        # Servers stay closed unless the fleet says who reaches them and why (L-58).
        block["bind"] = "127.0.0.1"
        mapped.explained["--host"] = "kept on loopback until the service's exposure says why (L-58)"
        out.note(
            where,
            f"{source.name}: listened on {bind}; imported on 127.0.0.1: to open it, give it "
            "exposure: {level: lan, reason: ...} and bind: " + bind + " (L-58)",
        )
    alias = mapped.fields.get("alias", source.alias)
    engine = ENGINES.get(program.kind)
    if bind is None and engine is not None and engine.default_host is None and not source.image:
        # Servers stay closed unless the fleet says who reaches them and why (L-58).
        out.note(
            where,
            f"{source.name}: {engine.name} listened on every address (no --host); imported on "
            "127.0.0.1: to open it, give it exposure: {level: lan, reason: ...} and bind: "
            "0.0.0.0 (L-58)",
        )
    if alias is not None and alias != source.name:
        block["alias"] = alias
    else:
        block.pop("alias", None)  # the service's name is its alias by default
    if "alias" not in mapped.fields:
        flag = "--alias" if program.kind == "llama.cpp" else "--served-model-name"
        mapped.explained[flag] = "clients ask for the model by the service's name"
    if "port" not in block:
        block["port"] = traits(program.kind).default_port
        mapped.explained["--port"] = f"the server's default ({block['port']}), written out"
    if mapped.extra_args:
        block["extra_args"] = mapped.extra_args
    secret_names = list(mapped.secret_names)
    for item in source.env:
        if is_secret_name(item.name) or secret_in(item.value) is not None:
            secret_names.append(item.name)
            out.note(
                item.where,
                f"{item.name}: value not copied; put it in the service's secrets_env file",
            )
            continue
        section = "runtime_env" if runtime_owned(item.name) else "env"
        block.setdefault(section, {})[item.name] = item.value
    if source.secrets_file is not None:
        block["secrets_env"] = source.secrets_file
    elif secret_names:
        block["secrets_env"] = f"~/.config/inferfleet/secrets/{source.name}.env"
    if mapped.model is not None:
        block["model"] = model_ref(out, *mapped.model)
        if mapped.hub_ref is not None:
            out.hub_refs[block["model"]] = (mapped.hub_ref, where)
    ordered = {k: block[k] for k in BLOCK_ORDER if k in block}
    ordered.update(block)
    service = ImportedService(source.name, ordered, source.words, where, mapped.explained)
    service.kind, service.program = program.kind, len(program.program)
    return service


def _sha256_pin(binary: str, where: Where, out: Imported) -> dict[str, str]:
    """A vLLM/SGLang binary's sha256 when it is readable here (L-42); its version is what
    `inferfleet runtime pin` reads (running a server binary is not the import's effect)."""
    path = Path(binary)
    try:
        real = path.resolve(strict=True)
        digest = file_digests(real, size=real.stat().st_size).sha256
    except OSError:
        out.note(
            where,
            f"{binary} is not readable here: pin it on its host with `inferfleet runtime pin` "
            "(L-42)",
        )
        return {}
    out.note(where, f"{binary}: sha256 pinned; `inferfleet runtime pin` adds its version (L-42)")
    return {"sha256": digest}


__all__ = ["EnvItem", "Source", "model_name", "read_service"]
