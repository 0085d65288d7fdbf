"""MkDocs hooks: the handbook's reference pages, generated from their one source at build time.

- ``reference/cli.md`` from the Typer app (every verb, its usage, arguments and options);
- ``reference/fleet-file.md`` from the fleet file's JSON Schema (``inferfleet schema``);
- ``lessons.md`` from ``src/inferfleet/lessons/lessons.yaml`` (``inferfleet explain``);
- ``architecture.md`` from the README's ``## Architecture`` section (the package map lives
  in the README, next to the code it maps; the handbook shows the same text).

Nothing generated is committed, so no page can go stale. Registered in mkdocs.yml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, text in (
        ("reference/cli.md", cli_reference()),
        ("reference/fleet-file.md", fleet_reference()),
        ("lessons.md", lessons_page()),
        ("architecture.md", architecture_page()),
    ):
        files.append(File.generated(config, uri, content=text))
    return files


# ------------------------------------------------------------------ CLI


def cli_reference() -> str:
    import typer.main

    from inferfleet.cli.app import build_app

    # Typer ships its own click (typer._click): the command tree is walked by its public
    # methods (list_commands, get_command, get_params), whichever click it is.
    root: Any = typer.main.get_command(build_app(full=True))
    out = [
        "# CLI reference",
        "",
        "Generated from the command itself (`inferfleet VERB -h` prints the same).",
        "Exit codes: `0` ok, `1` an operation or gate failed, `2` bad input, `3` the contract "
        "probe failed after a deploy.",
        "",
    ]
    with root.context_class(root, info_name="inferfleet") as ctx:
        for name in root.list_commands(ctx):
            command = root.get_command(ctx, name)
            if command is not None:
                out += _command(command, ctx, f"inferfleet {name}")
    return "\n".join(out) + "\n"


def _command(command: Any, parent: Any, path: str) -> list[str]:
    ctx = command.context_class(command, info_name=path.split(" ")[-1], parent=parent)
    lines = [f"## `{path}`", ""]
    help_text = (command.help or "").strip()
    if help_text:
        lines += [_escape_block(help_text), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```", f"{path} {usage}".rstrip(), "```", ""]
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if param.param_type_name == "argument":
            text = _cell(getattr(param, "help", None) or "")
            rows.append((f"`{str(param.name).upper()}`", "argument", text))
        elif record is not None:
            names, text = record
            rows.append((f"`{names}`", "option", _cell(text)))
    if rows:
        lines += ["| name | kind | help |", "|---|---|---|"]
        lines += [f"| {_cell(n)} | {k} | {h} |" for n, k, h in rows]
        lines.append("")
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                lines += _command(sub, ctx, f"{path} {name}")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _escape_block(text: str) -> str:
    # Typer help texts use \b paragraphs and plain newlines; markdown wants blank lines.
    return re.sub(r"\n\s*\x08\n", "\n\n", text)


# ------------------------------------------------------------------ fleet file


def fleet_reference() -> str:
    from inferfleet.fleetfile.fleet import Fleet

    schema = Fleet.model_json_schema(mode="validation")
    out = [
        "# Fleet file reference",
        "",
        "Generated from the fleet file's JSON Schema (`inferfleet schema` prints it; point "
        "your editor at it for completion). Unknown keys are errors. The guide with "
        "examples: [The fleet file](../guides/fleet-file.md).",
        "",
    ]
    out += _object("fleet.yaml (top level)", schema, schema)
    for name, definition in sorted(schema.get("$defs", {}).items()):
        if definition.get("type") == "object" or "properties" in definition:
            out += _object(name, definition, schema)
    return "\n".join(out) + "\n"


def _object(title: str, definition: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    props: dict[str, Any] = definition.get("properties", {})
    lines = [f"## {title}", ""]
    if definition.get("description"):
        lines += [str(definition["description"]), ""]
    if not props:
        return lines
    required = set(definition.get("required", []))
    lines += ["| key | type | default | what |", "|---|---|---|---|"]
    for key, prop in props.items():
        default = "(required)" if key in required else _default(prop)
        what = _cell(str(prop.get("description", "")))
        lines.append(f"| `{key}` | {_cell(_type(prop))} | {default} | {what} |")
    lines.append("")
    return lines


def _default(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return ""
    value = prop["default"]
    return "`null`" if value is None else f"`{_cell(repr(value))}`"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = str(prop["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "const" in prop:
        return f"`{prop['const']!r}`"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and "patternProperties" in prop:
        [inner] = list(prop["patternProperties"].values())[:1] or [{}]
        return f"map of name to {_type(inner)}"
    return str(kind)


# ------------------------------------------------------------------ lessons


def lessons_page() -> str:
    from inferfleet.lessons import lessons

    out = [
        "# Lessons",
        "",
        "The operational lessons inferfleet encodes, each as a check, a gate, a default or a "
        "probe (`inferfleet explain L-xx` prints one with the rules that encode it).",
        "",
    ]
    for lesson in lessons().values():
        out += [
            f"## {lesson.id}: {lesson.title}",
            "",
            f"*{lesson.kind}*",
            "",
            f"**What happened.** {lesson.happened}",
            "",
            f"**Why.** {lesson.why}",
            "",
            f"**What inferfleet does.** {lesson.does}",
            "",
        ]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ architecture


def architecture_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Architecture\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    if match is None:
        raise ValueError("README.md has no '## Architecture' section")
    return "# Architecture\n" + match.group(1)
