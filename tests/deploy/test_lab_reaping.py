"""The test lab survives a run that was killed before its teardown.

CI once failed every deploy test because a killed run left its bridge with
the lab's address behind. A new lab must tear down what a dead run recorded
(and unrecorded leftovers of the same naming scheme) by name and pid, and
never touch a lab whose owner still runs.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from deploy_hosts import REGISTRY, Lab, reap_dead_labs, sh

pytestmark = pytest.mark.needs_root  # creates bridges and network namespaces


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _plant(tag: str, subnet: str) -> subprocess.Popen[bytes]:
    bridge, netns, veth = f"ifbr{tag}", f"if{tag}-h1", f"ifv{tag}0"
    sh("ip", "link", "add", bridge, "type", "bridge")
    sh("ip", "addr", "add", f"{subnet}.1/24", "dev", bridge)
    sh("ip", "netns", "add", netns)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"ifp{tag}0")
    sh("ip", "link", "set", f"ifp{tag}0", "netns", netns)
    sh("ip", "link", "set", veth, "master", bridge)
    return subprocess.Popen(["ip", "netns", "exec", netns, "sleep", "300"])


def _links() -> str:
    return sh("ip", "-o", "link", "show").stdout


def test_a_dead_runs_lab_is_torn_down_and_a_live_one_is_kept(lab: Lab) -> None:
    planted = _plant("9901", "10.250.201")
    unrecorded = _plant("9902", "10.250.202")
    REGISTRY.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = REGISTRY / "9901.json"
    record.write_text(
        json.dumps(
            {"owner": _dead_pid(), "bridge": "ifbr9901", "netns": ["if9901-h1"],
             "veths": ["ifv99010"]}
        )
    )  # fmt: skip
    try:
        reap_dead_labs()
        links = _links()
        namespaces = sh("ip", "netns", "list").stdout
        assert "ifbr9901" not in links and "ifbr9902" not in links
        assert "if9901-h1" not in namespaces and "if9902-h1" not in namespaces
        assert planted.wait(10) != 0 and unrecorded.wait(10) != 0  # killed by pid
        assert not record.exists()
        # The session's own lab belongs to a live run: untouched and reachable.
        assert lab.bridge in links
        assert (REGISTRY / f"{lab.tag}.json").exists()
        for host in lab.hosts.values():
            assert host.sshd is not None and host.sshd.poll() is None
    finally:
        for process in (planted, unrecorded):
            if process.poll() is None:
                os.kill(process.pid, 9)
                process.wait(10)
        for tag in ("9901", "9902"):
            sh("ip", "netns", "del", f"if{tag}-h1", check=False)
            sh("ip", "link", "del", f"ifbr{tag}", check=False)
        record.unlink(missing_ok=True)
