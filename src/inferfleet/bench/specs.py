"""A spec file's content validated (a bench's arms, a tune's space): its first
problem is the user's to fix, as a :class:`UsageError` that names where it is."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from inferfleet.errors import UsageError

Spec = TypeVar("Spec", bound=BaseModel)


def validated(shape: type[Spec], data: object, *, where: str, hint: str) -> Spec:
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"{loc}: {first['msg']}", where=where, hint=hint) from None
