"""What every document module shares: building a document from an object."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import (
    NotRequired,
    TypeVar,
    cast,
    get_origin,
    get_type_hints,
)

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

D = TypeVar("D")


def document_of(doc_type: type[D], source: object, **override: object) -> D:
    """A ``doc_type`` document whose keys are ``source``'s attributes of the same name.

    Keys come in the order the type declares them (the JSON's key order);
    ``override`` gives the value of a key whose attribute has another name or
    shape. A ``NotRequired`` key is set only when ``override`` names it. Lists,
    tuples and dicts are copied (tuples become lists), so the document shares
    no mutable value with ``source``. A key the type does not declare, or a
    required key ``source`` lacks, is a programming error (TypeError,
    AttributeError).
    """
    typed_dict: type = doc_type  # a class, so hashable: its keys are read once
    keys = _keys(typed_dict)
    unknown = sorted(set(override) - set(keys))
    if unknown:
        raise TypeError(f"{doc_type.__name__} has no key(s) {', '.join(unknown)}")
    values: dict[str, object] = {}
    for key, required in keys.items():
        if key in override:
            values[key] = override[key]
        elif required:
            values[key] = _copied(getattr(source, key))
    return cast(D, values)


@cache
def _keys(doc_type: type) -> dict[str, bool]:
    """A document type's keys in declaration order, each with whether it is required."""
    hints = get_type_hints(doc_type, include_extras=True)
    return {key: get_origin(hint) is not NotRequired for key, hint in hints.items()}


def _copied(value: object) -> object:
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value
