"""``inferfleet explain``: the lessons ship with the tool, for every id the code cites.

The texts are packaged data (src/inferfleet/lessons/lessons.yaml); these tests
tie them to the code: every ``L-xx`` cited anywhere under src/ has a text,
every rule's lesson has one, and every rule id a text names is a real rule.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from helpers import ROOT

from inferfleet import documents
from inferfleet.checks.engine import catalogue
from inferfleet.lessons import KINDS, LESSON_ID, lesson, lesson_id, lessons

SRC = ROOT / "src" / "inferfleet"
# How a lesson's "does" names a rule of check: the id in backticks, in parentheses.
NAMED_RULE = re.compile(r"\(`([a-z0-9]+(?:-[a-z0-9]+)+)`\)")


def cited_in_src() -> dict[str, str]:
    """Every lesson id cited in any file under src/, with one place that cites it."""
    cited: dict[str, str] = {}
    for path in sorted(SRC.rglob("*")):
        if not path.is_file() or path.suffix in {".pyc", ".png", ".gguf"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in LESSON_ID.finditer(text):
            cited.setdefault(match.group(), str(path.relative_to(ROOT)))
    return cited


def test_every_lesson_cited_in_src_has_a_text() -> None:
    cited = cited_in_src()
    assert len(cited) >= 58  # L-01 .. L-58 are all encoded somewhere
    missing = {k: where for k, where in cited.items() if k not in lessons()}
    assert not missing, f"lesson ids cited in src/ without a text in lessons.yaml: {missing}"


def test_every_rule_lesson_has_a_text_and_every_named_rule_exists() -> None:
    rules = catalogue()
    assert {r.lesson for r in rules} <= set(lessons())
    ids = {r.id for r in rules}
    for found in lessons().values():
        named = set(NAMED_RULE.findall(found.does))
        assert named <= ids, f"{found.id} names rules check does not have: {named - ids}"
        if found.kind == "check":
            # A lesson marked "check" is encoded by at least one rule.
            assert any(r.lesson == found.id for r in rules), found.id


def test_texts_are_complete_and_well_formed() -> None:
    for key, found in lessons().items():
        assert found.id == key and found.kind in KINDS
        for text in (found.title, found.happened, found.why, found.does):
            assert text.isprintable() and len(text) >= 10, (key, text)
        assert "\n" not in found.does and "TODO" not in found.does


@pytest.mark.parametrize(
    ("typed", "expected"), [("L-25", "L-25"), ("l-25", "L-25"), ("L25", "L-25"), ("l7", "L-07")]
)
def test_lesson_ids_as_users_type_them(typed: str, expected: str) -> None:
    assert lesson_id(typed) == expected
    assert lesson(typed).id == expected


def test_explain_a_lesson_prints_what_happened_why_and_the_rules(cli: Any) -> None:
    result = cli("explain", "L-22")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert "L-22 (check): Vision needs the projector passed explicitly" in out
    for heading in ("What happened", "Why", "What inferfleet does"):
        assert heading in out
    assert "came up healthy and answered as a text-only model" in out
    # The rules come from the catalogue, with severity and title.
    assert "Rules of `inferfleet check` that encode L-22" in out
    assert re.search(r"vision-without-mmproj\s+error\s+image input on llama.cpp", out)
    assert "mmproj-without-image-input" in out


def test_explain_a_lesson_without_rules(cli: Any) -> None:
    result = cli("explain", "l47")
    assert result.code == 0, result.stderr
    assert "L-47 (bench): Salt every prompt" in result.stdout
    assert "Rules of" not in result.stdout


def test_explain_a_rule_prints_the_rule_then_its_lesson(cli: Any) -> None:
    result = cli("explain", "quantized-v-needs-flash-attn")
    assert result.code == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first == "quantized-v-needs-flash-attn: error rule of `inferfleet check` (lesson L-20)"
    assert rest[0] == "  refuses: a quantized V cache needs flash attention on"
    assert "L-20 (check): A quantized V cache needs flash attention" in result.stdout


def test_explain_json_is_the_typed_document(cli: Any) -> None:
    schema = documents.json_schema("inferfleet.explain/v1")
    by_rule = cli("explain", "spec-one-drafter", "--json")
    assert by_rule.code == 0, by_rule.stderr
    doc = by_rule.document()
    jsonschema.validate(doc, schema)
    assert doc["rule"]["id"] == "spec-one-drafter" and doc["rule"]["lesson"] == "L-14"
    assert doc["lesson"]["id"] == "L-14" and doc["lesson"]["kind"] == "check"
    assert [r["id"] for r in doc["rules"]] == [r.id for r in catalogue() if r.lesson == "L-14"]
    by_lesson = cli("explain", "L-03", "--json").document()
    jsonschema.validate(by_lesson, schema)
    assert by_lesson["rule"] is None and by_lesson["rules"] == []
    assert by_lesson["lesson"]["does"].startswith("`models fetch` sends no Range header")


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("vision-without-mmpoj", "vision-without-mmproj"),
        ("L-99", "L-49"),
        ("spec-one-draftr", "spec-one-drafter"),
    ],
)
def test_unknown_id_exits_2_with_close_matches(cli: Any, typed: str, suggested: str) -> None:
    result = cli("explain", typed)
    assert result.code == 2
    assert result.stdout == ""
    assert f"no lesson or rule named '{typed}'" in result.stderr
    assert "did you mean" in result.stderr and suggested in result.stderr
    assert "L-01 to L-60" in result.stderr and "Traceback" not in result.stderr


def test_unknown_id_with_control_characters_is_escaped(cli: Any) -> None:
    result = cli("explain", "evil\x1b[31m")
    assert result.code == 2 and "\x1b" not in result.stderr
    assert "did you mean" not in result.stderr  # nothing is close


def test_check_list_points_to_explain(cli: Any) -> None:
    result = cli("check", "--list")
    assert result.code == 0
    assert "inferfleet explain LESSON" in result.stdout
    assert "shared/lessons.md" not in result.stdout
