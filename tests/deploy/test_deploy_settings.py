"""L-54 through ``deploy``: the host renders settings files; the operator's dry run agrees.

The rendered content's digest is one of the facts the host reports
(``apply --facts``), so ``deploy --dry-run`` on the operator's machine, which
never sees the secrets, decides from the same facts as ``apply`` on the host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deploy_repo import FleetRepo

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

TEMPLATE = "key: ${API_KEY}\n"


def deploy(cli: Any, repo: FleetRepo, *args: str) -> Any:
    return cli("deploy", "h1", *args, "-y", "--file", str(repo.fleet_file))


def test_deploy_renders_settings_on_the_host_and_the_dry_run_agrees(
    cli: Any, fleet: Any, tmp_path: Path
) -> None:
    dest = tmp_path / "etc-h1" / "web.yml"
    secrets = tmp_path / "web.env"
    secrets.write_text("API_KEY=sk-deploy-0123456789\n")
    settings = [{"template": "settings/web.yml", "dest": str(dest), "allow": ["API_KEY"],
                 "env_files": [str(secrets)]}]  # fmt: skip
    repo: FleetRepo = fleet({"a": {"settings": settings}})
    repo.commit("the settings template", {"settings/web.yml": TEMPLATE})

    first = deploy(cli, repo)
    assert first.code == 0, first.stderr
    assert dest.read_text() == "key: sk-deploy-0123456789\n"
    assert dest.stat().st_mode & 0o777 == 0o600
    pid = repo.record("h1", "a")["pid"]  # type: ignore[index]

    # A rotated secret on the host (nothing committed): the host's facts carry the
    # new rendered digest, so the operator's dry run shows the write and the restart.
    secrets.write_text("API_KEY=sk-rotated-9876543210\n")
    dry = deploy(cli, repo, "--service", "a", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert f"write {dest} (changed; from its template, mode 600)" in dry.stdout
    assert "start" in dry.stdout and "sk-rotated" not in dry.stdout
    assert dest.read_text() == "key: sk-deploy-0123456789\n"  # a dry run writes nothing
    rotated = deploy(cli, repo, "--service", "a")
    assert rotated.code == 0, rotated.stderr
    assert dest.read_text() == "key: sk-rotated-9876543210\n"
    assert repo.record("h1", "a")["pid"] != pid  # type: ignore[index]
    pid = repo.record("h1", "a")["pid"]  # type: ignore[index]

    # A template change deploys the service: rendered on the host after the pull.
    repo.commit("settings: one more key", {"settings/web.yml": TEMPLATE + "retries: 3\n"})
    second = deploy(cli, repo)
    assert second.code == 0, second.stderr
    assert dest.read_text().endswith("retries: 3\n")
    assert repo.record("h1", "a")["pid"] != pid  # type: ignore[index]
    plan = json.loads(cli("plan", "h1", "--file", str(repo.fleet_file), "--json").stdout)
    assert {i["service"]: i["action"] for i in plan["hosts"][0]["items"]} == {"a": "keep"}
