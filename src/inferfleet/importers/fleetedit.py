"""Imported blocks added to a fleet file, its comments and layout kept (ruamel round trip).

Re-dumping a hand-written fleet file would drop every comment that explains
a setting (the lesson ids, the reasons); ruamel's round-trip mode edits the
document in place. Nothing here writes a file: the CLI validates the text,
compares the argv, then replaces the file atomically.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from inferfleet.errors import SpecError, SpecErrors
from inferfleet.importers.result import Imported, free_name
from inferfleet.importers.yamlsource import key_line

SECTIONS = ("hosts", "runtimes", "models", "services", "groups")


def _yaml(existing: str | None = None) -> YAML:
    """A round-trip YAML writing lists as ``existing`` has them (``- x`` under its key, or
    indented): ruamel keeps comments but lays every list out one way, so an edit would
    otherwise move lines it did not change."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    sequence, offset = 4, 2
    if existing:
        from ruamel.yaml.util import load_yaml_guess_indent

        try:
            _data, guessed, dash = load_yaml_guess_indent(existing)
        except YAMLError:
            guessed = dash = None  # the load that follows names the error
        if guessed is not None and dash is not None:
            sequence, offset = guessed, dash
    yaml.indent(mapping=_mapping_indent(existing or ""), sequence=sequence, offset=offset)
    yaml.width = 4096  # a long value (an image by digest) stays on its line
    return yaml


def _mapping_indent(text: str) -> int:
    """How far ``text`` indents a nested key (2 when it has none)."""
    for line in text.splitlines():
        body = line.lstrip(" ")
        if body and body[0] not in "#-" and len(body) < len(line):
            return len(line) - len(body)
    return 2


def _plain(value: Any) -> Any:
    """A round-trip node as plain data, to compare with an imported block."""
    return json.loads(json.dumps(value, default=str))


# Strings that YAML 1.1 readers (PyYAML, the fleet loader) take for booleans.
_BOOLISH = frozenset({"on", "off", "yes", "no", "y", "n", "true", "false"})


def quoted(value: Any) -> Any:
    """``value`` with every boolean-looking string quoted (``flash_attn: "on"``)."""
    if isinstance(value, dict):
        return {k: quoted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [quoted(v) for v in value]
    if isinstance(value, str) and value.lower() in _BOOLISH:
        return DoubleQuotedScalarString(value)
    return value


def merge(
    existing: str | None, imported: Imported, *, origin: str, file: str, verb: str = "imported"
) -> str:
    """The fleet file's text with ``imported`` added; a clash of names is a SpecError."""
    yaml = _yaml(existing)
    try:
        doc = yaml.load(existing) if existing else None
    except YAMLError as exc:
        raise SpecError(f"the fleet file is not valid YAML: {exc}", path=file) from None
    if doc is None:
        doc = CommentedMap()
        doc["version"] = 1
        doc.yaml_set_start_comment(f"Imported by `inferfleet import` from {origin}.")
    if not isinstance(doc, CommentedMap):
        raise SpecError("the fleet file is not a mapping", path=file, line=1)
    for key in SECTIONS:
        if key in doc and not isinstance(doc[key], dict):
            raise SpecError(f"{key} is not a mapping", path=file, line=key_line(doc, key))
    sections = {name: doc.get(name) for name in SECTIONS}

    def section(name: str) -> CommentedMap:
        held = sections[name]
        if held is None:
            held = CommentedMap()
            doc[name] = held
            sections[name] = held
        assert isinstance(held, CommentedMap)
        return held

    hosts = section("hosts")
    if imported.host not in hosts:
        hosts[imported.host] = (
            {"address": "localhost"} if imported.host == "local" else CommentedMap()
        )
    runtimes = _add_shared(section("runtimes") if imported.runtimes else None, imported.runtimes)
    models = _add_shared(section("models") if imported.models else None, imported.models)
    services = section("services")
    hint = "rename or remove it there, or leave that model out of the import"
    problems = _clashes(services, "service", imported.services, file, hint)
    if imported.groups:
        problems += _clashes(section("groups"), "group", imported.groups, file)
    if problems:
        raise problems[0] if len(problems) == 1 else SpecErrors(problems)
    for name, service in imported.services.items():
        block = dict(service.block)
        block["runtime"] = runtimes.get(block["runtime"], block["runtime"])
        if "model" in block:
            block["model"] = models.get(block["model"], block["model"])
        services[name] = quoted(block)
        services.yaml_set_comment_before_after_key(
            name, before=f"{verb} from {service.where}", indent=2
        )
    if imported.groups:
        section("groups").update(imported.groups)
    stream = io.StringIO()
    yaml.dump(doc, stream)
    return stream.getvalue()


def _clashes(
    held: CommentedMap, kind: str, names: Mapping[str, Any], file: str, hint: str = ""
) -> list[SpecError]:
    """A problem for each of ``names`` already in ``held``: an import never replaces an entry."""
    return [
        SpecError(
            f"{kind} {name!r} is already in the fleet file",
            path=file,
            line=key_line(held, name),
            hint=hint,
        )
        for name in names
        if name in held
    ]


def _add_shared(held: CommentedMap | None, blocks: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Runtimes and models: an equal block already there is reused, a clashing name renamed.

    Returns imported name -> name in the fleet file.
    """
    renamed: dict[str, str] = {}
    if held is None:
        return renamed
    for name, block in blocks.items():
        same = next((n for n, b in held.items() if _plain(b) == _plain(block)), None)
        if same is not None:
            renamed[name] = str(same)
            continue
        target = free_name(name, held)
        held[target] = quoted(block)
        renamed[name] = target
    return renamed


def edit(
    existing: str,
    *,
    file: str,
    blocks: Mapping[tuple[str, str], dict[str, Any]] | None = None,
    values: Mapping[tuple[str, ...], Any] | None = None,
    note: str = "",
) -> str:
    """The fleet file's text with new named ``blocks`` added and ``values`` set in place.

    ``blocks``: (section, name) -> block, a new entry of that section (a name
    already there is a SpecError: adopting never replaces what the fleet
    says). ``values``: a key path -> value under an entry that exists
    (``("services", "chat", "runtime")``); only those keys change, every other
    line and comment stays. ``note`` is written as a comment above each new
    block and after each value set.
    """
    yaml = _yaml(existing)
    try:
        doc = yaml.load(existing)
    except YAMLError as exc:
        raise SpecError(f"the fleet file is not valid YAML: {exc}", path=file) from None
    if not isinstance(doc, CommentedMap):
        raise SpecError("the fleet file is not a mapping", path=file, line=1)
    for (section, name), block in (blocks or {}).items():
        held = doc.get(section)
        if held is None:
            held = doc[section] = CommentedMap()
        if not isinstance(held, CommentedMap):
            raise SpecError(f"{section} is not a mapping", path=file, line=key_line(doc, section))
        if name in held:
            raise SpecError(
                f"{section}.{name} is already in the fleet file",
                path=file,
                line=key_line(held, name),
                hint="choose another name (--name), or remove that entry first",
            )
        held[name] = quoted(block)
        if note:
            held.yaml_set_comment_before_after_key(name, before=note, indent=2)
    for path, value in (values or {}).items():
        node: Any = doc
        for depth, key in enumerate(path[:-1]):
            if not isinstance(node, CommentedMap) or key not in node:
                where = ".".join(path[: depth + 1])
                raise SpecError(f"{where} is not in the fleet file", path=file)
            node = node[key]
        if not isinstance(node, CommentedMap):
            raise SpecError(f"{'.'.join(path[:-1])} is not a mapping", path=file)
        node[path[-1]] = quoted(value)
        if note:
            _note_after(node, path[-1], note)
    stream = io.StringIO()
    yaml.dump(doc, stream)
    return stream.getvalue()


def _note_after(node: CommentedMap, key: Any, note: str) -> None:
    """``note`` as the comment after ``key``'s value; a comment already there is kept first.

    ruamel keeps the full-line comments that follow a value in the same token
    as its end-of-line comment: only the token's first line is touched.
    """
    slot = node.ca.items.get(key)
    token = slot[2] if slot is not None and len(slot) > 2 else None
    if token is None:
        node.yaml_add_eol_comment(f"# {note}", key)
        return
    first, newline, rest = token.value.partition("\n")
    token.value = f"{first.rstrip()}; {note}{newline}{rest}"
