"""`up` holds a ``binary:`` runtime to its pins too, with the real llama-server (L-42).

The embedded example, its llama.cpp runtime given as the built binary: the
pins `runtime pin` prints start it; a wrong sha256 or version is refused
before anything starts, with the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_up_refuses_another_binary_and_starts_the_pinned_one(
    cli: Any, local_fleet: Path, llama_server: Path, servers_of: list[int], port: int
) -> None:
    data = yaml.safe_load(local_fleet.read_text())
    data["runtimes"]["llama-cpp"] = {"kind": "llama.cpp", "binary": str(llama_server)}
    local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    printed = cli("runtime", "pin", "llama-cpp", "--file", str(local_fleet))
    assert printed.code == 0, printed.stderr
    pins = yaml.safe_load(printed.stdout)["runtimes"]["llama-cpp"]
    assert pins["binary"] == str(llama_server) and len(pins["sha256"]) == 64
    assert pins["version"] in llama_server_version(llama_server)

    for field, wrong in (("sha256", "0" * 64), ("version", "1 (not-this-build)")):
        data["runtimes"]["llama-cpp"] = {**pins, field: wrong}
        local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))
        refused = cli("up", str(local_fleet), "--json")
        assert refused.code != 0
        err = " ".join(refused.stderr.split())
        assert f"runtimes.llama-cpp.{field}" in err and "(L-42)" in err
        assert "inferfleet runtime pin llama-cpp" in err and "Traceback" not in err
        assert not [c for c in psutil.net_connections("tcp") if c.laddr and c.laddr[1] == port]

    data["runtimes"]["llama-cpp"] = pins
    local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    started = cli("up", str(local_fleet), "--json")
    assert started.code == 0, started.stderr
    row = json.loads(started.stdout)["services"][0]
    servers_of.append(row["pid"])
    assert row["action"] == "started"
    assert cli("down", "--file", str(local_fleet), "--json").code == 0


def llama_server_version(binary: Path) -> str:
    import subprocess

    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout + done.stderr
