"""``document_of``: a document built from an object's attributes keeps its type's key order."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from inferfleet.documents import StatusHost, ValidateDocument, ValidationIssue, document_of


@dataclass
class Host:
    # Attributes in another order than StatusHost declares its keys, and one it does not name.
    healthy: int
    services: int
    lock: str | None
    checkout_head: str | None
    detail: str
    reach: str
    local: bool
    address: str
    host: str
    memory: dict[str, int] = field(default_factory=dict)
    extra: str = "not in the document"


@dataclass
class Validation:
    file: str
    valid: bool
    errors: tuple[ValidationIssue, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)


def test_keys_follow_the_type_and_overrides_replace_attributes() -> None:
    host = Host(2, 3, None, "abc", "", "ssh", False, "10.0.0.2", "gpu1")
    doc = document_of(StatusHost, host, detail="reached over ssh")
    assert list(doc) == list(StatusHost.__annotations__)
    assert doc["detail"] == "reached over ssh"
    assert doc["host"] == "gpu1" and doc["healthy"] == 2
    assert "extra" not in doc


def test_containers_are_copied_and_not_required_keys_come_only_from_overrides() -> None:
    issue = ValidationIssue(line=1, column=2, message="bad", hint="fix it")
    source = Validation(file="fleet.yaml", valid=False, errors=(issue,), counts={"hosts": 1})
    doc = document_of(ValidateDocument, source, schema="inferfleet.validate/v1")
    assert doc == {
        "schema": "inferfleet.validate/v1",
        "file": "fleet.yaml",
        "valid": False,
        "errors": [issue],
    }
    assert isinstance(doc["errors"], list)


def test_an_unknown_override_or_a_missing_attribute_is_refused() -> None:
    source = Validation(file="fleet.yaml", valid=True)
    with pytest.raises(TypeError, match="has no key"):
        document_of(ValidateDocument, source, schema="inferfleet.validate/v1", colour="red")
    with pytest.raises(AttributeError):
        document_of(ValidateDocument, source)  # no attribute "schema"
