"""Documents of the fleet file: ``validate``, ``show``."""

from __future__ import annotations

from typing import (
    Any,
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


class FleetCounts(TypedDict):
    hosts: int
    runtimes: int
    models: int
    services: int


class ValidationIssue(TypedDict):
    line: int | None
    column: int | None
    message: str
    hint: str


class ValidateDocument(TypedDict):
    schema: Literal["inferfleet.validate/v1"]
    file: str
    valid: bool
    errors: list[ValidationIssue]
    counts: NotRequired[FleetCounts]  # only for a valid file


class ShowFleetDocument(TypedDict):
    """``show`` without a service: the whole fleet as parsed."""

    schema: Literal["inferfleet.show/v1"]
    file: str
    fleet: dict[str, Any]


class ShowServiceDocument(TypedDict):
    """``show SERVICE``: the service as parsed, and the launch it runs (render/pipeline)."""

    schema: Literal["inferfleet.show/v1"]
    file: str
    service: str
    spec: dict[str, Any]
    ctx_total: int
    argv: list[str]
    spec_digest: str
    image: NotRequired[str]
    model_bytes: NotRequired[int]
