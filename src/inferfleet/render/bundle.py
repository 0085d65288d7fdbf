"""Every artifact of a fleet, as data; writing them out; diffing against a previous run.

``render_fleet`` is a pure function of the fleet (and the host facts passed
in): same input, same bytes. Layout of an output directory::

    hosts/<host>/<service>.argv.json       the server argv, as data
    hosts/<host>/<service>.env             tunables (EnvironmentFile)
    hosts/<host>/systemd/<unit>.service    backend: systemd, system scope
    hosts/<host>/systemd-user/<unit>.service   backend: systemd, user scope
    hosts/<host>/quadlet/<unit>.container  backend: quadlet
    monitoring/prometheus.yml              scrape jobs (+ rule_files)
    monitoring/rules/inferfleet.rules.yml  recording + alert rules
    monitoring/grafana/inferfleet-fleet.json
    hosts/<host>/gateway/litellm.yaml      the gateway's LiteLLM config (keys by reference)
    hosts/<host>/gateway/inferfleet-gateway.service   gateway backend: systemd (or .container)
    clients/providers.json · clients/litellm.yaml · clients/opencode.json
    hosts/<proxy host>/caddy/Caddyfile     the auth proxy (when the fleet declares proxy:)
    hosts/<proxy host>/caddy/inferfleet-proxy.service   proxy backend: systemd (or .container)
    clients/openwebui.env
    MANIFEST.json                          every file, its sha256 and install path
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from inferfleet.bounded import load_json
from inferfleet.budget.fleet import ShapeOf
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.fleetfile.groups import deploy_units, is_unit, unit_service
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.render import clients, gateway, grafana, prometheus, quadlet, systemd
from inferfleet.render import proxy as render_proxy
from inferfleet.render.envfile import env_file
from inferfleet.render.extra_args import refuse_launch_flags
from inferfleet.render.facts import HostFacts, facts_for
from inferfleet.render.frontdoor import FrontLaunch
from inferfleet.render.launch import Resolved, resolve
from inferfleet.render.rpc import rpc_launch_args

MANIFEST = "MANIFEST.json"
MANIFEST_SCHEMA = "inferfleet.render/v1"


@dataclass(frozen=True)
class Artifact:
    path: str  # relative to the output directory, POSIX separators
    content: str
    kind: str  # argv env preset systemd quadlet prometheus rules grafana client caddy gateway
    service: str | None = None
    host: str | None = None
    install: str | None = None  # where it goes on the host, when it is installed there

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()


def service_artifacts(resolved: Resolved) -> list[Artifact]:
    name, host = resolved.name, resolved.host_name
    base = f"hosts/{host}"
    service = resolved.service
    found = [
        Artifact(
            f"{base}/{name}.env", env_file(name, service), "env", name, host, resolved.env_file
        )
    ]
    if service.kind == "llm":
        argv = json.dumps({"service": name, "argv": resolved.argv}, indent=2) + "\n"
        found.append(Artifact(f"{base}/{name}.argv.json", argv, "argv", name, host))
    if resolved.preset is not None:
        where, text = resolved.preset
        found.append(Artifact(f"{base}/{name}.presets.ini", text, "preset", name, host, where))
    unit = _unit_artifact(resolved)
    if unit is not None:
        found.append(unit)
    return found


def _unit_artifact(resolved: Resolved) -> Artifact | None:
    """The systemd unit or Quadlet file of a service with one, and where it is installed."""
    service = resolved.service
    system = service.unit.scope == "system"
    home = resolved.facts.home
    if service.backend == "systemd":
        folder = "systemd" if system else "systemd-user"
        installed_in = "/etc/systemd/system" if system else f"{home}/.config/systemd/user"
        file = f"{resolved.unit}.service"
        text = systemd.service_unit(resolved).text()
    elif service.backend == "quadlet":
        folder = "quadlet"
        installed_in = "/etc/containers/systemd" if system else f"{home}/.config/containers/systemd"
        file = f"{resolved.unit}.container"
        text = quadlet.container_unit(resolved).text()
    else:
        return None
    return Artifact(
        f"hosts/{resolved.host_name}/{folder}/{file}",
        text,
        service.backend,
        resolved.name,
        resolved.host_name,
        f"{installed_in}/{file}",
    )


def fleet_artifacts(loaded: LoadedFleet) -> list[Artifact]:
    fleet = loaded.fleet
    return [
        Artifact("monitoring/prometheus.yml", prometheus.scrape_config(fleet), "prometheus"),
        Artifact(
            f"monitoring/rules/{prometheus.RULES_FILE}", prometheus.rules_file(fleet), "rules"
        ),
        Artifact(
            f"monitoring/grafana/{grafana.UID}.json", grafana.dashboard_json(fleet), "grafana"
        ),
        Artifact("clients/providers.json", clients.providers_json(fleet), "client"),
        Artifact("clients/litellm.yaml", clients.litellm_yaml(fleet), "client"),
        Artifact("clients/opencode.json", clients.opencode_json(fleet), "client"),
        Artifact("clients/openwebui.env", clients.openwebui_env(fleet), "client"),
    ]


def render_fleet(
    loaded: LoadedFleet,
    only: str | None = None,
    facts: Mapping[str, HostFacts] | None = None,
    shape_of: ShapeOf | None = None,
) -> list[Artifact]:
    """Every artifact (or one service's), sorted by path; ``shape_of`` reads a model's
    header for a service split over RPC workers."""
    fleet = loaded.fleet
    if only is not None and not is_unit(fleet, only):
        raise UsageError(
            f"no service named {only!r} in {loaded.path}",
            hint=f"known services: {', '.join(deploy_units(fleet)) or '(none)'} (a swap "
            "group's members render with their group)",
        )
    host_facts = facts_for(fleet, facts, fleet_subdir=loaded.repo_subdir)
    names = [only] if only is not None else deploy_units(fleet)
    found: list[Artifact] = []
    for name in names:
        service = unit_service(fleet, name)
        refuse_launch_flags(fleet, name)
        split = rpc_launch_args(fleet, name, shape_of) if service.rpc else None
        resolved = resolve(fleet, loaded.root, name, host_facts[service.host], rpc_args=split)
        found += service_artifacts(resolved)
    if only is None:
        found += fleet_artifacts(loaded)
        if fleet.gateway is not None:
            launch = gateway.gateway_launch(fleet, host_facts[fleet.gateway.host])
            found += front_artifacts(launch, "gateway", "gateway")
        if fleet.proxy is not None:
            found += front_artifacts(proxy_launch(fleet, host_facts[fleet.proxy.host]), "caddy")
    return sorted(found, key=lambda a: a.path)


def proxy_launch(fleet: Fleet, facts: HostFacts) -> FrontLaunch:
    """The auth proxy's launch on its host as ``up``/``apply`` make it there: the pinned Caddy
    under the host's cache (or the image's), its folder in the host's state dir, the keys
    by reference to their file (L-55). A rootful container's ``User=`` needs the deploying
    user's ids (``--facts`` uid and gid)."""
    assert fleet.proxy is not None
    host = fleet.hosts[fleet.proxy.host]
    return render_proxy.proxy_launch(
        fleet,
        facts,
        folder=render_proxy.folder_in(facts.expand(host.state_dir)),
        binary=render_proxy.host_binary(facts),
        keys_env=render_proxy.keys_path(fleet, facts),
    )


def front_artifacts(launch: FrontLaunch, folder: str, config_kind: str = "caddy") -> list[Artifact]:
    """A front door's config (and unit), as ``up``/``apply`` install them on its host, under
    ``hosts/<host>/<folder>/``. A process-backend part keeps its config in the state dir of
    whoever runs it (``INFERFLEET_STATE_DIR`` may move it): no fixed install path."""
    installed = launch.backend != "process"
    return [
        Artifact(
            f"hosts/{launch.host}/{folder}/{PurePosixPath(f.path).name}",
            f.content,
            config_kind if f.kind == "config" else f.kind,
            launch.name,
            launch.host,
            f.path if installed else None,
        )
        for f in launch.files
    ]


def _entry(artifact: Artifact) -> dict[str, str]:
    fields = {
        "path": artifact.path,
        "sha256": artifact.sha256,
        "kind": artifact.kind,
        "service": artifact.service,
        "host": artifact.host,
        "install": artifact.install,
    }
    return {k: v for k, v in fields.items() if v is not None}


def manifest(entries: list[dict[str, str]]) -> str:
    files = sorted(entries, key=lambda e: e["path"])
    return json.dumps({"schema": MANIFEST_SCHEMA, "files": files}, indent=2) + "\n"


_NOT_OURS = "render into an empty directory, or one inferfleet rendered before"
MAX_MANIFEST_BYTES = 16 << 20  # a path, a hash and a service per rendered file


def read_manifest(out: Path) -> list[dict[str, str]]:
    """The entries of a previous render's manifest ([] when there is none)."""
    try:
        doc = load_json(out / MANIFEST, MAX_MANIFEST_BYTES, what="render manifest",
                        error=UsageError, hint=_NOT_OURS)  # fmt: skip
    except FileNotFoundError:
        return []
    if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA:
        raise UsageError(f"{out / MANIFEST} is not an inferfleet render manifest", hint=_NOT_OURS)
    files = doc.get("files", [])
    return [e for e in files if isinstance(e, dict) and isinstance(e.get("path"), str)]


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str  # added | removed | changed
    diff: str


def diff_bundle(artifacts: list[Artifact], out: Path, *, only: str | None = None) -> list[FileDiff]:
    """What writing ``artifacts`` would change in ``out`` (a previous render)."""
    previous = [e["path"] for e in read_manifest(out) if only is None or e.get("service") == only]
    current = {a.path: a for a in artifacts}
    changes: list[FileDiff] = []
    for path in sorted(set(previous) | set(current)):
        old_file = out / path
        old = old_file.read_text(encoding="utf-8") if old_file.is_file() else None
        new = current[path].content if path in current else None
        if old == new:
            continue
        status = "added" if old is None else "removed" if new is None else "changed"
        lines = difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            (new or "").splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
        changes.append(FileDiff(path, status, "".join(lines)))
    return changes
