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
    assert report.proxy_root is None  # no proxy there
    assert HostReport.from_json({**GOOD, "proxy_root": ROOT}, host="h1").proxy_root == ROOT


# The shape of a PEM certificate (its body need not be a real one to test the shape).
ROOT = "-----BEGIN CERTIFICATE-----\n" + ("QUJD" * 16 + "\n") * 3 + "-----END CERTIFICATE-----\n"


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
        # The proxy's CA root becomes the only root a TLS connection trusts: one certificate,
        # nothing before or after it, bounded.
        {"proxy_root": "not a certificate"},
        {"proxy_root": ROOT + ROOT},
        {"proxy_root": "-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"},
        {"proxy_root": ROOT.replace("QUJD", "QU\x1bD", 1)},
        {"proxy_root": ROOT.replace("\n", "\n" + "QUJD" * 20 + "\n", 1)},  # a line too long
        {"proxy_root": ROOT[:28] + ("QUJD" * 19 + "\n") * 300 + ROOT[-26:]},
        {"proxy_root": 5},
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
