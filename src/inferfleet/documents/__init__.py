"""The versioned ``--json`` documents, as types: one TypedDict per document, one module per topic.

Every document a command prints with ``--json`` is built as one of these
types (mypy checks the keys and value types where it is built) and carries
its version in ``schema`` (``"inferfleet.check/v1"``). :func:`json_schema`
turns a document type into its JSON Schema (draft 2020-12, unknown keys
refused), which the tests validate each command's real output against and
which scripts can use to check what they parse.

Adding a key to a document is compatible; renaming or removing one, or
changing its meaning, is a new version (``/v2``) with a new type.

Nested parts that are another model's own dump (the fleet file as parsed, a
service's spec, a runtime's client block) are typed ``dict[str, Any]``: the
fleet file's schema is ``inferfleet schema``.
"""

# ruff: noqa: F403, F405  (one module per topic; this package is their one import path)
from __future__ import annotations

from typing import Any, Union, get_args, get_type_hints

from pydantic import TypeAdapter

from inferfleet.documents.base import JSON_SCHEMA_DIALECT as JSON_SCHEMA_DIALECT
from inferfleet.documents.base import document_of as document_of
from inferfleet.documents.budget import *
from inferfleet.documents.check import *
from inferfleet.documents.deploy import *
from inferfleet.documents.doctor import *
from inferfleet.documents.fleet import *
from inferfleet.documents.gguf import *
from inferfleet.documents.measure import *
from inferfleet.documents.models import *
from inferfleet.documents.render import *
from inferfleet.documents.run import *
from inferfleet.documents.runtimes import *

DOCUMENT_TYPES: tuple[type, ...] = (
    ValidateDocument,
    ShowFleetDocument,
    ShowServiceDocument,
    CheckDocument,
    CheckRulesDocument,
    ExplainDocument,
    SecretsScanDocument,
    RenderDocument,
    DiffDocument,
    RuntimeDocument,
    VenvRuntimeDocument,
    RuntimesDocument,
    GGUFInspectDocument,
    BudgetDocument,
    UpDocument,
    DownDocument,
    StatusDocument,
    ProbeDocument,
    BenchDocument,
    TuneDocument,
    PlanDocument,
    DeployPlanDocument,
    DeployDocument,
    ApplyDocument,
    FactsDocument,
    ModelsManifestDocument,
    ModelsVerifyDocument,
    ModelsFetchDocument,
    ArchiveListDocument,
    ArchiveRestoreDocument,
    ArchivePruneDocument,
    DoctorDocument,
    BootstrapDocument,
)


def schema_id(document: type) -> str:
    """The ``schema`` value a document type carries (``inferfleet.check/v1``)."""
    (value,) = get_args(get_type_hints(document)["schema"])
    return str(value)


def _by_id() -> dict[str, list[type]]:
    found: dict[str, list[type]] = {}
    for document in DOCUMENT_TYPES:
        found.setdefault(schema_id(document), []).append(document)
    return found


SCHEMA_IDS: tuple[str, ...] = tuple(sorted(_by_id()))


def json_schema(schema: str) -> dict[str, Any]:
    """The JSON Schema of the document ``schema`` (an id such as ``inferfleet.status/v2``).

    Objects refuse keys the type does not name, so a document that grows a key
    without its type fails validation. Documents with two shapes (``show``:
    the fleet or one service) validate against either.
    """
    types = _by_id().get(schema)
    if types is None:
        raise KeyError(f"no document type for {schema!r}; known: {', '.join(SCHEMA_IDS)}")
    target: Any = types[0] if len(types) == 1 else Union[tuple(types)]  # noqa: UP007
    doc = TypeAdapter(target).json_schema(mode="serialization")
    _close_objects(doc)
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": schema, **doc}


def _close_objects(node: Any) -> None:
    """additionalProperties: false on every object with named properties, recursively."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)
