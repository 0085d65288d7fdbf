"""A host's `apply --facts` report is input like any other: a wrong shape is a clear error."""

from __future__ import annotations

from typing import Any

import pytest

from inferfleet.deploy.errors import RemoteError
from inferfleet.deploy.rollout import HostReport

GOOD: dict[str, Any] = {
    "schema": "inferfleet.facts/v1",
    "host": "h1",
    "head": "a" * 40,
    "lock": None,
    "facts": {"user": "ops", "home": "/home/ops", "cache_dir": "/home/ops/.cache/inferfleet"},
    "markers": {},
    "states": {"gemma": {"service": "gemma", "pid": 42, "state": "healthy", "healthy": True}},
}


def test_a_well_formed_report_is_read() -> None:
    report = HostReport.from_json(GOOD, host="h1")
    assert report.head == "a" * 40
    assert report.states["gemma"].pid == 42 and report.states["gemma"].state == "healthy"
    assert report.memory == {}  # an older host sends none
    memory = {"nvidia:0": 18234 << 20, "amd:1": 1 << 30, "ram": 6 << 30}
    assert HostReport.from_json({**GOOD, "memory": memory}, host="h1").memory == memory


@pytest.mark.parametrize(
    "change",
    [
        {"host": None},
        {"head": ["x"]},
        {"facts": {"user": "ops", "home": "/h", "cache_dir": "/c", "rm -rf": "/"}},
        {"facts": {"user": 5, "home": "/h", "cache_dir": "/c"}},
        {"states": {"gemma": {"service": "gemma", "pid": "not a pid"}}},
        {"states": []},
        {"markers": {"gemma": {"service": "gemma"}}},
        {"memory": {"\x1b[31mram": 1}},  # a device name status would print
        {"memory": {"ram": -1}},
        {"memory": {"nvidia:0": "18 GiB"}},
    ],
)
def test_a_wrong_shape_is_a_clear_error_naming_the_host(change: dict[str, Any]) -> None:
    with pytest.raises(RemoteError) as caught:
        HostReport.from_json({**GOOD, **change}, host="h1")
    assert "host h1 sent a facts report this inferfleet cannot read" in caught.value.message
    assert "same inferfleet version" in caught.value.hint


def test_a_report_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(RemoteError):
        HostReport.from_json(["h1"], host="h1")
