"""``plan``/``deploy`` to a host that is this machine work from the current checkout.

The fleet's only host is 127.0.0.1 with no ``checkout:`` (its default,
``~/fleet``, does not exist) and the repository has no remote: the local
connector runs ``apply`` here, in the operator's repository, with this
interpreter, so nothing is pushed or pulled; the apply is gated, locked and
marked as on any host (the marker records what runs, L-41).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest
from deploy_repo import FleetRepo

# The local fleet of the apply tests (host here = 127.0.0.1, fake runtime, tiny model).
from test_apply_local import local_repo  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow


def test_deploy_and_plan_to_localhost_run_in_this_checkout(
    cli: Any,
    local_repo: FleetRepo,  # noqa: F811
    port: int,
) -> None:
    operator = local_repo.fleet_file.parent
    subprocess.run(["git", "-C", str(operator), "remote", "remove", "origin"], check=True)
    fleet = str(local_repo.fleet_file)

    plan = cli("plan", "--file", fleet, "--json")
    assert plan.code == 0, plan.stderr + plan.stdout
    (before,) = json.loads(plan.stdout)["hosts"]
    assert before["error"] is None and [i["service"] for i in before["items"]] == ["a"]
    assert before["items"][0]["action"] != "keep"

    result = cli("deploy", "here", "-y", "--file", fleet, "--json")
    assert result.code == 0, result.stderr + result.stdout
    doc = json.loads(result.stdout)
    assert json.dumps(doc).count('"deployed"') >= 1, doc
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    marker = local_repo.marker("here", "a")
    assert marker is not None and marker["revision"] == local_repo.head()

    again = cli("plan", "--file", fleet, "--json")
    assert again.code == 0, again.stderr
    (host,) = json.loads(again.stdout)["hosts"]
    assert host["error"] is None
    assert [(i["service"], i["action"], i["recorded"]) for i in host["items"]] == [
        ("a", "keep", local_repo.head())
    ]
