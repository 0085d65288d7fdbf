"""llama-swap's ``config.yaml`` read into fleet-file blocks.

llama-swap's rules, as its README and ``config.example.yaml`` document them,
kept here so the import runs exactly the command llama-swap would:

- ``macros`` (global, and per model overriding them): names of
  ``[A-Za-z0-9_-]``, at most 64 characters, ``PORT`` and ``MODEL_ID``
  reserved; values are scalars and may use macros defined before them. They
  expand in ``cmd``, ``cmdStop``, ``proxy`` and ``checkEndpoint``; a
  ``${NAME}`` left after expansion is an error.
- ``${PORT}``: llama-swap hands out ports from ``startPort`` (default 5800)
  to the models whose ``cmd`` or ``proxy`` use it, in sorted model-id order;
  ``proxy`` defaults to ``http://localhost:${PORT}``.
- ``groups``: ``swap`` (default true: one member at a time), ``exclusive``
  (default true: loading a member unloads other groups), ``persistent``;
  models in no group share an implicit swapping group.

A group of llama.cpp members becomes a fleet swap group (one llama-server
router; ``max_loaded: 1`` when it swaps, 0 when its members run side by
side; ``idle_unload`` from a shared ``ttl``); everything else with no
equivalent is listed as a note.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inferfleet.fleetfile.fleet import Host
from inferfleet.importers import commandline
from inferfleet.importers.llamacpp import model_name
from inferfleet.importers.llamaswap_groups import at_line, mappings, read_groups, unknown_keys
from inferfleet.importers.result import Imported, ImportedService, Where
from inferfleet.importers.service import EnvItem, Source, read_service
from inferfleet.importers.yamlsource import item_line, key_line, node_line, read_yaml, value_line

START_PORT = 5800
_MACRO_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MACRO_USE = re.compile(r"\$\{([^}]*)\}")
RESERVED_MACROS = frozenset({"PORT", "MODEL_ID"})
# The keys llama-swap documents (config.example.yaml), and what the import does with each.
TOP_KEYS = frozenset(
    {"healthCheckTimeout", "logLevel", "logTimeFormat", "logToStdout", "metricsMaxInMemory",
     "captureBuffer", "startPort", "macros", "models", "groups", "hooks", "apiKeys",
     "includeAliasesInList", "sendLoadingState", "peers"}
)  # fmt: skip
MODEL_KEYS = frozenset(
    {"cmd", "cmdStop", "proxy", "aliases", "env", "checkEndpoint", "ttl", "unlisted",
     "useModelName", "filters", "name", "description", "concurrencyLimit", "macros",
     "metadata", "sendLoadingState"}
)  # fmt: skip
# What each key without an equivalent means for the imported fleet, in a line.
NO_EQUIVALENT = {
    "logLevel": "inferfleet logs per service; the level is llama-swap's own",
    "logTimeFormat": "llama-swap's log format",
    "logToStdout": "llama-swap's log routing",
    "metricsMaxInMemory": "llama-swap's in-memory metrics; inferfleet renders Prometheus jobs",
    "captureBuffer": "llama-swap's request capture",
    "hooks": "llama-swap's start-up hooks; a fleet group's `default`/`resident` preload members",
    "apiKeys": "not copied: the fleet's auth proxy (proxy:) holds client keys",
    "includeAliasesInList": "the gateway lists each service's alias",
    "sendLoadingState": "llama-swap's loading messages in streams",
    "peers": "llama-swap's peer forwarding; each fleet host serves its own services",
    "cmdStop": "inferfleet stops a server by its recorded pid (L-43)",
    "unlisted": "every service is listed by the gateway",
    "useModelName": "the server's alias is the model name clients send",
    "filters": "request rewriting happens in the gateway, not per service",
    "name": "display name",
    "description": "display text",
    "concurrencyLimit": "the server's slots (parallel) bound concurrency",
    "metadata": "llama-swap's /v1/models metadata",
}


def expand(
    text: str,
    macros: dict[str, str],
    where: Where,
    out: Imported,
    *,
    field: str,
    keep: frozenset[str] = frozenset(),
) -> str | None:
    """``${NAME}`` replaced; None (with a problem) when one does not resolve (``keep``: left
    for later, as ``${PORT}`` in a macro's value)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        return macros.get(name, match.group(0))

    # Macro values were expanded when defined, but may carry ${PORT} / ${MODEL_ID}.
    result = _MACRO_USE.sub(one, _MACRO_USE.sub(one, text))
    left = sorted({m.group(1) for m in _MACRO_USE.finditer(result)} - keep)
    if left:
        env = [n for n in left if n.startswith("env.")]
        out.problem(
            where,
            f"{field}: macro{'s' if len(left) > 1 else ''} "
            f"{', '.join('${' + n + '}' for n in left)} not defined",
            "environment macros resolve where llama-swap starts: write the value"
            if env
            else "define it under macros: (global or the model's), or fix its name",
        )
        return None
    return result


def _macros(node: Any, base: dict[str, str], path: Path, out: Imported) -> dict[str, str]:
    """A macros map read by llama-swap's rules: later macros may use earlier ones."""
    found = dict(base)
    if node is None:
        return found
    if not isinstance(node, dict):
        out.problem(at_line(path, node_line(node)), "macros must be a mapping of NAME: value")
        return found
    for name, value in node.items():
        where = at_line(path, key_line(node, name))
        if not isinstance(name, str) or not _MACRO_NAME.match(name):
            out.problem(where, f"macro name {name!r} is not [A-Za-z0-9_-], 1 to 64 characters")
            continue
        if name in RESERVED_MACROS:
            out.problem(where, f"macro {name} is reserved: llama-swap sets it itself")
            continue
        if isinstance(value, dict | list) or value is None:
            out.problem(where, f"macro {name}: a value is a string, number or boolean")
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        expanded = expand(text, found, where, out, field=f"macro {name}", keep=RESERVED_MACROS)
        if expanded is not None:
            found[name] = expanded
    return found


def assign_ports(uses_port: dict[str, bool], start: int) -> dict[str, int]:
    """llama-swap's ${PORT}: sorted model ids, one port each for those that use it (after
    their macros expanded; a model without ``proxy`` uses it through the default proxy)."""
    ports: dict[str, int] = {}
    port = start
    for model_id in sorted(uses_port):
        if uses_port[model_id]:
            ports[model_id] = port
            port += 1
    return ports


def _uses_port(model: Any, macros: dict[str, str]) -> bool:
    if not model.get("proxy"):
        return True
    for key in ("cmd", "proxy", "cmdStop"):
        text = str(model.get(key) or "")
        for _ in range(8):  # macros nest; each pass expands one level
            text = _MACRO_USE.sub(lambda m: macros.get(m.group(1), m.group(0)), text)
        if "${PORT}" in text:
            return True
    return False


def read_config(path: Path, host_name: str, host: Host | None) -> Imported:
    """Every model of a llama-swap config as a fleet service; problems collected, not raised."""
    out = Imported(host=host_name)
    doc = read_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        out.problem(at_line(path, 1), "not a llama-swap config: no models: mapping")
        return out
    unknown_keys(doc, TOP_KEYS, "top-level", path, out)
    for key in sorted(set(doc) & set(NO_EQUIVALENT)):
        out.note(at_line(path, key_line(doc, key)), f"{key}: no equivalent ({NO_EQUIVALENT[key]})")
    macros = _macros(doc.get("macros"), {}, path, out)
    start = doc.get("startPort", START_PORT)
    if not isinstance(start, int) or not 1 <= start <= 65535:
        out.problem(at_line(path, key_line(doc, "startPort")), "startPort is not a port number")
        start = START_PORT
    timeout = doc.get("healthCheckTimeout")
    models = doc["models"]
    local_macros = {
        str(model_id): _macros(model.get("macros"), macros, path, out)
        for model_id, model in models.items()
        if isinstance(model, dict)
    }
    ports = assign_ports(
        {m: _uses_port(models[m], local) for m, local in local_macros.items()}, start
    )
    names: dict[str, str] = {}  # model id -> service name
    taken: dict[str, Where] = {}  # every id and alias clients may send
    ttls: dict[str, int] = {}
    for model_id, model, where in mappings(path, models, "model", MODEL_KEYS, "cmd:", out):
        for key in sorted(set(model) & set(NO_EQUIVALENT)):
            out.note(
                at_line(path, key_line(model, key)),
                f"models.{model_id}.{key}: no equivalent ({NO_EQUIVALENT[key]})",
            )
        _claim(str(model_id), where, taken, out)
        for index, alias in enumerate(model.get("aliases") or []):
            alias_where = at_line(path, item_line(model.get("aliases"), index))
            _claim(str(alias), alias_where, taken, out)
            out.note(
                alias_where,
                f"models.{model_id}.aliases: {alias!r} has no equivalent (clients use the "
                f"service's alias {model_id!r})",
            )
        local = dict(local_macros[str(model_id)])
        if model_id in ports:
            local["PORT"] = str(ports[model_id])
        local["MODEL_ID"] = str(model_id)
        service = _service(path, str(model_id), model, local, host_name, host, out)
        if service is None:
            continue
        if timeout is not None:
            service.block.setdefault("health", {})["timeout"] = f"{int(timeout)}s"
        ttl = model.get("ttl", 0)
        if ttl:
            ttls[service.name] = int(ttl)
        names[str(model_id)] = service.name
        out.services[service.name] = service
    read_groups(path, doc, names, ttls, out)
    return out


def _claim(name: str, where: Where, taken: dict[str, Where], out: Imported) -> None:
    if name in taken:
        out.problem(
            where,
            f"model name {name!r} is already used at {taken[name]}",
            "every model id and alias must be unique (llama-swap refuses the config too)",
        )
    else:
        taken[name] = where


def _service(
    path: Path,
    model_id: str,
    model: Any,
    macros: dict[str, str],
    host_name: str,
    host: Host | None,
    out: Imported,
) -> ImportedService | None:
    cmd_line = value_line(model, "cmd")
    where = at_line(path, key_line(model, "cmd") or node_line(model))
    raw = model.get("cmd")
    if not isinstance(raw, str) or not raw.strip():
        out.problem(where, f"model {model_id!r} has no cmd")
        return None
    construct = commandline.shell_construct(raw)
    if construct is not None:
        at = at_line(path, None if cmd_line is None else cmd_line + construct.line)
        out.problem(
            at,
            f"models.{model_id}.cmd uses {construct.construct!r}, which needs a shell: llama-swap "
            "passes it to the server as a word",
            "write the server's command alone (put wrappers in a script the fleet does not import)",
        )
        return None
    text = expand(raw, macros, where, out, field=f"models.{model_id}.cmd")
    if text is None:
        return None
    try:
        words = commandline.split_command(text)
    except ValueError as exc:
        out.problem(where, f"models.{model_id}.cmd: {exc}")
        return None
    env = _env(path, model_id, model, out)
    source = Source(model_name(model_id), words, where, alias=model_id, env=env)
    service = read_service(out, source, host_name=host_name, host=host)
    if service is None:
        return None
    block = service.block
    # The proxy's port must be the one the server listens on (its --port, or 8080).
    port = _port(path, model_id, model, macros, block["port"], out)
    if port is not None:
        block["port"] = port
    health = _health(path, model_id, model, macros, out)
    if health is not None:
        block.setdefault("health", {})["path"] = health
    return service


def _port(
    path: Path, model_id: str, model: Any, macros: dict[str, str], flag: Any, out: Imported
) -> int | None:
    """Where llama-swap sends requests: the proxy's port, which the server must listen on."""
    proxy = model.get("proxy") or "http://localhost:${PORT}"
    where = at_line(path, key_line(model, "proxy") or key_line(model, "cmd"))
    text = expand(str(proxy), macros, where, out, field=f"models.{model_id}.proxy")
    if text is None:
        return None
    try:
        port = urlsplit(text).port
    except ValueError:
        port = None
    if port is None:
        out.problem(where, f"models.{model_id}.proxy {text!r} names no port")
        return None
    if flag is not None and flag != port:
        out.problem(
            where,
            f"models.{model_id}: the server listens on {flag} but proxy sends to {port}",
            "make --port and proxy agree",
        )
    return port


def _health(
    path: Path, model_id: str, model: Any, macros: dict[str, str], out: Imported
) -> str | None:
    """The path llama-swap checks the server's health on, when the config names one."""
    check = model.get("checkEndpoint")
    if check is None:
        return None
    where = at_line(path, key_line(model, "checkEndpoint"))
    text = expand(str(check), macros, where, out, field=f"models.{model_id}.checkEndpoint")
    if text == "none":
        out.note(
            where,
            f"models.{model_id}.checkEndpoint: none has no equivalent (every service is "
            "health-gated on /health)",
        )
        return None
    return text


def _env(path: Path, model_id: str, model: Any, out: Imported) -> list[EnvItem]:
    """``env: [NAME=value]``, each with its line."""
    items = model.get("env") or []
    found = []
    for index, item in enumerate(items):
        where = at_line(path, item_line(items, index))
        name, eq, value = str(item).partition("=")
        if not eq or not name:
            out.problem(where, f"models.{model_id}.env item {item!r} is not NAME=value")
            continue
        found.append(EnvItem(name, value, where))
    return found
