"""``render`` writes the front door's units as ``up``/``apply`` install them: the proxy's
Caddyfile and its systemd unit or Quadlet file, naming the pinned Caddy where the host's
installer puts it, its folder in the host's state dir, its keys by reference (L-55)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from render_helpers import CADDY_IMAGE, load, quadlet_proxy_fleet, run

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import caddy as caddy_tool
from inferfleet.render import proxy as render_proxy
from inferfleet.render.bundle import render_fleet
from inferfleet.render.facts import default_facts


def test_the_systemd_proxy_unit_runs_the_caddy_the_host_installs(
    tmp_path: Path, monkeypatch: Any
) -> None:
    loaded = load("runtimes")
    facts = default_facts(loaded.fleet.hosts["lab"])
    by_path = {a.path: a for a in render_fleet(loaded)}
    unit = by_path["hosts/lab/caddy/inferfleet-proxy.service"]
    assert (
        unit.service == "proxy" and unit.install == "/etc/systemd/system/inferfleet-proxy.service"
    )
    state = "/home/svc/.local/state/inferfleet/proxy"
    assert (
        f"ExecStart={render_proxy.host_binary(facts)} run --config {state}/Caddyfile"
        in unit.content
    )
    assert by_path["hosts/lab/caddy/Caddyfile"].install == f"{state}/Caddyfile"
    # The renderer and the installer agree on where the pinned Caddy lives.
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    here = replace(facts, cache_dir=str(tmp_path / "cache"))
    assert render_proxy.host_binary(here) == str(caddy_tool.install_dir() / render_proxy.BINARY)


def test_a_process_proxy_renders_its_caddyfile_without_an_install_path() -> None:
    (caddyfile,) = [a for a in render_fleet(load("homelab")) if a.service == "proxy"]
    assert caddyfile.path == "hosts/atlas/caddy/Caddyfile" and caddyfile.install is None


def test_a_rootful_quadlet_proxy_needs_the_deploying_users_ids(cli: Any, tmp_path: Path) -> None:
    fleet = quadlet_proxy_fleet(tmp_path, "system")
    out = tmp_path / "out"
    refused = cli("render", "--file", str(fleet), "--out", str(out), "--no-check")
    assert refused.code == 2, refused.stderr
    assert "uid and gid are not known" in refused.stderr and "--facts" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not out.exists()  # nothing half-written
    facts = tmp_path / "facts.yaml"
    facts.write_text("lab: {uid: '1001', gid: '1002'}\n")
    done = cli("render", "--file", str(fleet), "--out", str(out), "--facts", str(facts),
               "--no-check", "--json")  # fmt: skip
    assert done.code == 0, done.stderr
    container = (out / "hosts/lab/caddy/inferfleet-proxy.container").read_text()
    assert "User=1001:1002" in container and f"Image={CADDY_IMAGE}" in container
    assert "AddCapability=CAP_NET_BIND_SERVICE" in container  # port 443
    manifest = json.loads((out / "MANIFEST.json").read_text())
    (entry,) = [f for f in manifest["files"] if f["path"].endswith("inferfleet-proxy.container")]
    assert entry["install"] == "/etc/containers/systemd/inferfleet-proxy.container"


def test_the_rendered_proxy_container_passes_the_quadlet_generator(
    quadlet: str, tmp_path: Path
) -> None:
    folder = tmp_path / "units"
    folder.mkdir()
    loaded = load_fleet(quadlet_proxy_fleet(tmp_path, "user"))
    (container,) = [a for a in render_fleet(loaded) if a.kind == "quadlet" and a.service == "proxy"]
    assert "User=" not in container.content  # rootless: the user's own ids already
    (folder / Path(container.path).name).write_text(container.content)
    result = run(
        [quadlet, "-dryrun", "-user"], env={**os.environ, "QUADLET_UNIT_DIRS": str(folder)}
    )
    assert result.returncode == 0, result.stderr
    assert "inferfleet-proxy.service" in result.stdout
    assert f"{render_proxy.CONTAINER_BINARY} run --config" in result.stdout
