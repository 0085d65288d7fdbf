"""Waivers (L-59): a deliberate exception, with its reason, shown and failing nothing;
a stale one (expired, unknown rule, matching nothing) is itself a warning."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from check_helpers import Patch, build, check
from test_check_sarif import validate

from inferfleet.checks.engine import Report, run_checks
from inferfleet.checks.locate import locator
from inferfleet.fleetfile.loader import load_fleet

S = "services"
WAIVER_RULES = {"waiver-stale"}  # its cases: the stale tests below
# The operator's measured share (L-32): a warning without a waiver.
SHARE = {f"{S}.serve.gpu_memory_utilization": 0.982}
REASON = "measured 2026-09-26: 0.982 runs on this 32 GiB card"
FUTURE, PAST = "2999-01-01", "2020-01-01"


def waived(report: Report, rule: str) -> list[Any]:
    return [f for f in report.findings if f.rule == rule and f.waived]


def active(report: Report, rule: str) -> list[Any]:
    return [f for f in report.findings if f.rule == rule and not f.waived]


@pytest.mark.parametrize(
    ("patch", "waiver", "rule"),
    [
        (SHARE, {"service": "serve"}, "gpu-memory-utilization-cap"),
        (SHARE, {"host": "gpu"}, "gpu-memory-utilization-cap"),
        (SHARE, {}, "gpu-memory-utilization-cap"),  # the whole fleet
        # A host-level finding (no service): a host waiver covers hosts.<name>.*.
        (
            {"hosts.apu.devices": [{"name": "igpu", "vendor": "amd", "memory": "512MiB",
                                    "unified_memory": True}]},
            {"host": "apu"},
            "unified-memory-dedicated-vram",
        ),
        (
            {f"{S}.chat.metrics": False, f"{S}.chat.group": "swap", "groups": {"swap": {}}},
            {"group": "swap"},
            "metrics-off",
        ),
    ],
    ids=["service", "host", "fleet", "host-field", "group"],
)  # fmt: skip
def test_a_waiver_covers_its_subject_and_fails_nothing(
    tmp_path: Path, patch: Patch, waiver: dict[str, str], rule: str
) -> None:
    bare = check(tmp_path / "bare", patch)
    assert active(bare, rule) and not bare.passed(strict=True)
    entry = {"rule": rule, **waiver, "reason": REASON, "until": FUTURE}
    report = check(tmp_path / "waived", {**patch, "waivers": [entry]})
    (finding,) = waived(report, rule)
    assert finding.reason == REASON
    assert not active(report, rule) and not active(report, "waiver-stale")
    assert report.passed(strict=True), report.findings


def test_a_waiver_for_another_subject_does_not_cover(tmp_path: Path) -> None:
    entry = {"rule": "gpu-memory-utilization-cap", "service": "chat", "reason": REASON}
    report = check(tmp_path, {**SHARE, "waivers": [entry]})
    assert active(report, "gpu-memory-utilization-cap")
    # ...and it matches nothing, so it is stale.
    (stale,) = active(report, "waiver-stale")
    assert stale.severity == "warning" and stale.field == "waivers[0]"
    assert "matches no finding" in stale.message and stale.line is not None


def test_an_expired_waiver_lets_the_rule_fire_and_warns(tmp_path: Path) -> None:
    entry = {"rule": "gpu-memory-utilization-cap", "service": "serve", "reason": REASON,
             "until": PAST}  # fmt: skip
    report = check(tmp_path, {**SHARE, "waivers": [entry]})
    assert active(report, "gpu-memory-utilization-cap") and not report.waived
    (stale,) = active(report, "waiver-stale")
    assert "expired on 2020-01-01" in stale.message and stale.field == "waivers[0].until"
    # The last day still holds.
    loaded = load_fleet(tmp_path / "fleet.yaml")
    on_the_day = run_checks(loaded, today=datetime.date(2020, 1, 1))
    assert waived(on_the_day, "gpu-memory-utilization-cap")
    assert not active(on_the_day, "waiver-stale")


def test_an_unknown_rule_is_named_with_the_closest(tmp_path: Path) -> None:
    entry = {"rule": "vllm-kv-capcity", "reason": REASON}
    report = check(tmp_path, {"waivers": [entry]})
    (stale,) = active(report, "waiver-stale")
    assert "names no rule" in stale.message and "'vllm-kv-capacity'" in stale.message
    assert stale.field == "waivers[0].rule" and report.passed() and not report.passed(strict=True)


def test_a_subset_run_does_not_call_other_rules_waivers_stale(tmp_path: Path) -> None:
    from inferfleet.checks.engine import catalogue

    entry = {"rule": "metrics-off", "reason": REASON}
    check(tmp_path, {"waivers": [entry]})
    loaded = load_fleet(tmp_path / "fleet.yaml")
    only = [r for r in catalogue() if r.id in {"gpu-memory-utilization-cap", "waiver-stale"}]
    assert not run_checks(loaded, rules=only).findings


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"rule": "metrics-off", "service": "chat", "host": "gpu", "reason": REASON},
         "names one subject"),
        ({"rule": "metrics-off", "reason": "   "}, "needs a reason"),
        ({"rule": "metrics-off"}, "reason"),
        ({"rule": "metrics-off", "reason": "ok\x1b[2Jhidden"}, "control character"),
        ({"rule": "metrics-off", "reason": "x" * 501}, "at most 500"),
        ({"rule": "metrics-off", "reason": REASON, "until": "next spring"}, "until"),
        ({"rule": "Metrics Off", "reason": REASON}, "rule"),
        ({"rule": "metrics-off", "reason": REASON, "owner": "me"}, "owner"),
    ],
    ids=["two-subjects", "blank-reason", "no-reason", "control", "long", "date", "id", "extra"],
)  # fmt: skip
def test_a_bad_waiver_is_a_usage_error_naming_it(
    cli: Any, tmp_path: Path, entry: dict[str, Any], message: str
) -> None:
    path = tmp_path / "fleet.yaml"
    text = yaml.safe_dump(build({"waivers": [entry]}), sort_keys=False)
    path.write_text(text)
    result = cli("check", str(path))
    assert result.code == 2, result.stdout + result.stderr
    said = " ".join((result.stdout + result.stderr).split())
    assert "waivers" in said and message in said and "Traceback" not in said
    assert path.read_text() == text  # nothing written


def _write(tmp_path: Path, patch: Patch) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    return path


WAIVED = {**SHARE, "waivers": [{"rule": "gpu-memory-utilization-cap", "service": "serve",
                                "reason": REASON}]}  # fmt: skip


def test_text_json_and_sarif_show_the_waiver(cli: Any, tmp_path: Path) -> None:
    path = _write(tmp_path, WAIVED)
    text = cli("check", "--strict", str(path))
    assert text.code == 0, text.stdout
    out = " ".join(text.stdout.split())
    assert f"waived ({REASON}) warning L-32 gpu-memory-utilization-cap" in out
    assert "passed with 1 waived" in out

    doc = json.loads(cli("check", "--strict", "--json", str(path)).stdout)
    (finding,) = doc["findings"]
    assert (finding["waived"], finding["reason"]) == (True, REASON)
    assert doc["ok"] is True and doc["counts"]["waived"] == 1 and doc["counts"]["warning"] == 0

    sarif = cli("check", "--strict", "--sarif", str(path))
    assert sarif.code == 0
    log = json.loads(sarif.stdout)
    validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "gpu-memory-utilization-cap"
    assert result["suppressions"] == [
        {"kind": "inSource", "status": "accepted", "justification": REASON}
    ]


def test_explain_says_how_to_waive(cli: Any) -> None:
    result = cli("explain", "vllm-kv-capacity")
    said = " ".join(result.stdout.split())
    assert result.code == 0 and "- rule: vllm-kv-capacity" in said and "reason:" in said


def test_locator_points_at_a_waiver(tmp_path: Path) -> None:
    path = _write(tmp_path, {"waivers": [{"rule": "metrics-off", "reason": REASON}]})
    line, _ = locator(path.read_text())("waivers[0]")
    assert line is not None and "rule: metrics-off" in path.read_text().splitlines()[line - 1]
