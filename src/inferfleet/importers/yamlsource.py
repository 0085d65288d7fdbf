"""Read another tool's YAML with line numbers (ruamel's round-trip loader keeps them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from inferfleet.bounded import read_bounded
from inferfleet.errors import SpecError

MAX_BYTES = 1024 * 1024


def _spec_error(message: str, *, where: str = "", hint: str = "") -> SpecError:
    return SpecError(message, path=where or None, hint=hint)


def read_source(path: Path, max_bytes: int, what: str) -> bytes:
    """An imported file's bytes: a regular file, at most ``max_bytes``; a failure is a
    SpecError at the file (the one bounded reader, :func:`inferfleet.bounded.read_bounded`)."""
    return read_bounded(path, max_bytes, what=what, error=_spec_error)


def read_yaml(path: Path) -> Any:
    """The document, bounded and decoded; every failure a SpecError at path:line."""
    raw = read_source(path, MAX_BYTES, "YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = raw[: exc.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text (byte {exc.start})", path=path, line=at) from None
    try:
        return YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        raise SpecError(f"not valid YAML: {exc.problem or exc}", path=path, line=line) from None
    except YAMLError as exc:
        raise SpecError(f"not valid YAML: {exc}", path=path) from None


def key_line(node: Any, key: Any) -> int | None:
    """1-based line of ``key`` in a mapping read by :func:`read_yaml`."""
    if isinstance(node, CommentedMap) and key in node:
        return int(node.lc.key(key)[0]) + 1
    return None


def item_line(node: Any, index: int) -> int | None:
    if isinstance(node, CommentedSeq) and 0 <= index < len(node):
        return int(node.lc.item(index)[0]) + 1
    return None


def node_line(node: Any) -> int | None:
    if isinstance(node, CommentedMap | CommentedSeq):
        return int(node.lc.line) + 1
    return None


def value_line(node: Any, key: Any) -> int | None:
    """1-based line where ``key``'s value starts (a block scalar: the line after ``|``)."""
    if isinstance(node, CommentedMap) and key in node:
        line, _ = node.lc.value(key)
        value = node[key]
        style = getattr(value, "style", None)
        return int(line) + (2 if style in ("|", ">") else 1)
    return None
