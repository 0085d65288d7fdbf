"""``check --sarif`` validates against the SARIF 2.1.0 JSON Schema (vendored, see
tests/fixtures/sarif/README.md), for findings, skips, no findings and any path."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

import jsonschema
import pytest
import yaml
from check_helpers import BASE
from helpers import FIXTURES, ROOT

from inferfleet.checks.engine import catalogue

SCHEMA = json.loads((FIXTURES / "sarif" / "sarif-2.1.0-rtm.5.json").read_text("utf-8"))
BROKEN = FIXTURES / "fleets" / "broken.yaml"
HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"
# RFC 3986 characters of a URI reference (percent-encoding included): nothing else may appear.
URI_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")


def sarif_of(cli: Any, *args: str, code: int) -> dict[str, Any]:
    result = cli("check", *args, "--sarif")
    assert result.code == code, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    validate(doc)
    return doc


def validate(doc: dict[str, Any]) -> None:
    """The document against the schema, and every ``format: uri`` value by RFC 3986 shape
    (jsonschema checks that format only with optional packages installed)."""
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)
    assert urlsplit(doc["$schema"]).scheme == "https"
    run = doc["runs"][0]
    uris = [loc["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
            for loc in r["locations"]]  # fmt: skip
    for uri in uris:
        assert URI_CHARS.fullmatch(uri), uri


def test_the_schema_is_strict_enough_to_catch_a_bad_log() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]})  # driver needs a name
    bad_level = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
                 "results": [{"message": {"text": "m"}, "level": "fatal"}]}]}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(bad_level)


def test_findings_validate_with_rules_lessons_and_locations(cli: Any) -> None:
    doc = sarif_of(cli, str(BROKEN), code=1)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in catalogue()]
    assert "informationUri" not in run["tool"]["driver"]  # no link to a file users lack
    for rule in rules:
        assert "helpUri" not in rule
        lesson = rule["properties"]["lesson"]
        assert rule["fullDescription"]["text"].startswith(f"{lesson}: ")
        assert f"inferfleet explain {rule['id']}" in rule["help"]["text"]
        assert "What inferfleet does" in rule["help"]["markdown"]
    assert run["columnKind"] == "unicodeCodePoints"
    assert len(run["results"]) == 5
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        location = res["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == str(BROKEN.as_uri())
        assert location["region"]["startLine"] >= 1 and location["region"]["startColumn"] >= 1
    image = next(r for r in run["results"] if r["ruleId"] == "image-not-pinned")
    assert image["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 14,
        "startColumn": 12,
    }
    assert image["properties"] == {"lesson": "L-42"}  # no service: a runtime's finding


def test_no_findings_is_a_valid_empty_log(cli: Any) -> None:
    doc = sarif_of(cli, str(HOMELAB), code=0)
    assert doc["runs"][0]["results"] == []


def test_skipped_rules_are_notifications_and_odd_paths_are_encoded(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "my fleet #1"
    folder.mkdir()
    data = copy.deepcopy(BASE)
    data["runtimes"]["lcpp"]["source"].pop("commit")  # a warning with a line
    (folder / "fleet.yaml").write_text(yaml.safe_dump(data))

    doc = sarif_of(cli, str(folder / "fleet.yaml"), code=0)
    run = doc["runs"][0]
    (result,) = run["results"]
    assert result["ruleId"] == "source-not-pinned" and result["level"] == "warning"
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and " " not in uri and "%20" in uri and "%231" in uri
    assert Path(url2pathname(urlsplit(uri).path)) == folder / "fleet.yaml"
    # The model files are not on this machine: header rules skipped, and said so.
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert run["invocations"][0]["executionSuccessful"] is True
    assert notes, "header rules should be reported as not checked"
    ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
    for note in notes:
        assert note["level"] == "note" and note["message"]["text"].startswith("not checked for ")
        assert note["associatedRule"]["id"] in ids

    # A relative path stays relative (resolved against the checkout by the reader).
    monkeypatch.chdir(tmp_path)
    relative = sarif_of(cli, "my fleet #1/fleet.yaml", code=0)
    loc = relative["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "my%20fleet%20%231/fleet.yaml"
    assert unquote(loc["artifactLocation"]["uri"]) == "my fleet #1/fleet.yaml"
