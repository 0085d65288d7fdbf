"""Map a dotted fleet path (``services.chat.kv_cache.v``) to its line in the file.

Findings name the field; the user looks at the line. The YAML node tree
keeps every position; we walk it without building data.
"""

from __future__ import annotations

import re

import yaml

from inferfleet.checks.engine import Locator

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def split_path(dotted: str) -> list[str | int]:
    return [int(index) if index else key for key, index in _PART.findall(dotted)]


def locator(source: str) -> Locator:
    """A function from dotted path to (line, column), 1-based; the nearest parent found."""
    try:
        root = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        root = None

    def locate(dotted: str) -> tuple[int | None, int | None]:
        node = root
        mark = None
        for part in split_path(dotted):
            child = _child(node, part)
            if child is None:
                break
            node, mark = child
        if mark is None:
            return None, None
        return mark.line + 1, mark.column + 1

    return locate


def _child(node: yaml.Node | None, part: str | int) -> tuple[yaml.Node, yaml.Mark] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                # A scalar is reported at its value, a block at its key.
                mark = value.start_mark if isinstance(value, yaml.ScalarNode) else key.start_mark
                return value, mark
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        item = node.value[part]
        return item, item.start_mark
    return None
