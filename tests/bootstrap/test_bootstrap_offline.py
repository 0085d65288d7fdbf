"""A host whose pip reaches no package index: ``--deps index`` fails with pip's own words and
the fix; ``--deps auto`` notices and ships a wheelhouse made here.

The test hosts share this machine's pip configuration (which names local
indexes), so the host is cut off from every index the way a user would do
it: a ``pip.conf`` in the venv pointing at a closed port.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bootstrap_fleet import Cli, bare_fleet, bootstrap, on_host
from deploy_hosts import Lab

from inferfleet import __version__

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]
OFFLINE = "[global]\nindex-url = http://127.0.0.1:9/simple\nextra-index-url =\nfind-links =\n"


def test_a_host_without_an_index_gets_a_wheelhouse(
    cli: Cli,
    lab: Lab,
    deploy_env: dict[str, str],
    tmp_path: Path,
    wheel_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("INFERFLEET_REMOTE_COMMAND")
    repo = bare_fleet(lab, tmp_path / "fleet", {})
    venv = repo.folder / "hosts" / "h2" / "venv"
    made = on_host(lab, "h2", f"python3 -m venv {venv}")
    assert made.returncode == 0, made.stderr
    (venv / "pip.conf").write_text(OFFLINE)

    refused = bootstrap(cli, monkeypatch, wheel_cache, repo, "h2", "--deps", "index")
    assert refused.code == 1
    assert "pip on the host could not install inferfleet" in refused.stderr
    assert "from the host's package index" in refused.stderr
    assert "--deps wheelhouse" in refused.stderr  # the fix
    assert "last lines of its output:" in refused.stderr  # pip's own words
    assert not (venv / "bin" / "inferfleet").exists()
    assert not (venv / "inferfleet-bootstrap.json").exists()

    auto = bootstrap(cli, monkeypatch, wheel_cache, repo, "h2", "--json")
    assert auto.code == 0, auto.stderr
    assert "dependencies from the wheelhouse (auto)" in auto.stderr
    record = json.loads((venv / "inferfleet-bootstrap.json").read_text())
    assert record["deps"] == "wheelhouse" and record["version"] == __version__
    version = on_host(lab, "h2", f"{venv}/bin/inferfleet --version")
    assert version.stdout.strip() == f"inferfleet {__version__}"
