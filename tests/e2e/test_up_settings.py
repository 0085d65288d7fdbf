"""`up` renders the service's settings files like apply does (L-54), with the real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_up_renders_settings_and_restarts_only_when_they_change(
    cli: Any, local_fleet: Path, servers_of: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("host")  # not the fleet's folder: no secret in a repo
    dest = outside / "config" / "client.yml"
    secrets = outside / "client.env"
    secrets.write_text("TOKEN=tok-one-0123456789\n")
    (local_fleet.parent / "client.yml.in").write_text("token: ${TOKEN}\n")
    data = yaml.safe_load(local_fleet.read_text())
    data["services"]["gemma"]["settings"] = [
        {"template": "client.yml.in", "dest": str(dest), "allow": ["TOKEN"],
         "env_files": [str(secrets)]}
    ]  # fmt: skip
    local_fleet.write_text(yaml.safe_dump(data, sort_keys=False))

    def up() -> dict[str, Any]:
        result = cli("up", str(local_fleet), "--json", "--no-contract")
        assert result.code == 0, result.stderr
        row: dict[str, Any] = json.loads(result.stdout)["services"][0]
        servers_of.append(row["pid"])
        return row

    first = up()
    assert first["action"] == "started"
    assert dest.read_text() == "token: tok-one-0123456789\n"
    assert dest.stat().st_mode & 0o777 == 0o600
    assert up()["action"] == "unchanged"
    secrets.write_text("TOKEN=tok-two-9876543210\n")
    third = up()
    assert (third["action"], third["reason"]) == ("restarted", "settings changed")
    assert third["pid"] != first["pid"] and dest.read_text() == "token: tok-two-9876543210\n"
    assert cli("down", "--file", str(local_fleet), "--json").code == 0
