"""``inferfleet doctor [SERVICE...] [--host H]``: hosts' GPUs, memory, limits, tools vs the fleet.

Without a service or --host it looks at this machine (compared with the fleet's host that
names this machine, if any). A fleet host that is not this machine is looked
at on the host: ``inferfleet doctor --local --json`` runs there over the
deploy's ssh connector (``INFERFLEET_REMOTE_COMMAND`` names inferfleet
there, as for deploy) and its facts are compared here. Exit 1 when a finding
is an error (``apply`` runs the device checks in its devices gate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from inferfleet.cli.fleet_cmds import FleetOpt, HostOpt, JsonOpt, fleet_file, scope
from inferfleet.errors import EXIT_FAILED, UsageError
from inferfleet.output import Output, esc

if TYPE_CHECKING:
    from inferfleet.doctor.parse import Facts

REMOTE_TIMEOUT = 120.0


def doctor(
    services: list[str] = typer.Argument(
        None, help="The hosts of these services (default: this machine); hosts: --host."
    ),
    host: list[str] = HostOpt,
    file: Path | None = FleetOpt,
    local: bool = typer.Option(
        False, "--local", help="Only this machine's facts, no fleet file (what HOST runs remotely)."
    ),
    disks: list[str] = typer.Option(
        [], "--disk", help="A folder whose free space to report (repeatable)."
    ),
    env_files: list[str] = typer.Option(
        [], "--env-file", help="An env file to check this user can read (repeatable)."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Discover GPUs, memory, limits and tools of hosts; compare them with the fleet file."""
    from inferfleet.documents import DoctorDocument, DoctorHost

    out = Output(json_mode=json_out)
    loaded = None
    if not local:
        from inferfleet.fleetfile.loader import load_fleet

        # The discovered fleet file when there is one; without one, the doctor
        # still reports this machine's facts (there is nothing to compare).
        path = fleet_file(file, out)
        loaded = load_fleet(path) if path is not None else None
    if (services or host) and loaded is None:
        raise UsageError(
            "doctor --host HOST needs a fleet file (the host's address comes from it)",
            hint="pass --file fleet.yaml, or run it in the fleet repository",
        )
    hosts = [] if loaded is None else scope(loaded.fleet, services or [], host, out)[1]
    reports: list[DoctorHost] = []
    if not hosts:
        here = None
        if loaded is not None:
            here = next((n for n, h in loaded.fleet.hosts.items() if h.is_local(n)), None)
        reports.append(examine(loaded, here, disks, env_files))
    for name in hosts:
        reports.append(examine(loaded, name, disks, env_files))
    ok = all(r["ok"] for r in reports)
    document: DoctorDocument = {"schema": "inferfleet.doctor/v1", "ok": ok, "hosts": reports}
    if json_out:
        out.emit(document)
    else:
        for report in reports:
            print_report(out, report)
    if not ok:
        raise typer.Exit(EXIT_FAILED)


def examine(
    loaded: Any, name: str | None, extra: list[str], extra_env: list[str] | None = None
) -> Any:
    """One host's report: facts read there, findings computed here (also `host bootstrap`'s).

    ``extra`` are more folders to measure free disk at; ``extra_env`` more env files the
    host's user must be able to read (besides those the fleet names).
    """
    from inferfleet.backends.host_facts import gather
    from inferfleet.doctor import findings as rules

    needs: dict[str, int] = {}
    readers: dict[str, str] = {}
    local = True
    if loaded is not None and name is not None:
        host = loaded.fleet.hosts[name]
        needs = _needs(loaded, name)
        readers = _env_readers(loaded, name)
        local = host.is_local(name)
    folders = [*needs, *extra]
    envs = [*readers, *(extra_env or [])]
    if not folders:
        from inferfleet import paths

        folders = [str(paths.state_dir()), str(paths.cache_dir() / "models")]
    if local or name is None:
        facts = gather(folders, env_files=envs)
    else:
        facts = _remote(loaded, name, folders, envs)
    fleet = None if loaded is None else loaded.fleet
    found = rules.host_findings(facts, fleet, name, needs, readers)
    return {
        "host": name or "localhost",
        "local": local,
        "ok": not rules.blocking(found),
        "facts": facts.to_json(),
        "findings": [f.__dict__ for f in found],
        "devices_yaml": rules.devices_yaml(facts.gpus),
    }


def _needs(loaded: Any, name: str) -> dict[str, int]:
    """The host's state dir and model dirs, with the bytes the fleet puts in each."""
    from inferfleet.artifacts.locate import model_dir_on
    from inferfleet.artifacts.manifest import declared_files
    from inferfleet.errors import FleetError
    from inferfleet.render.facts import default_facts

    fleet = loaded.fleet
    host = fleet.hosts[name]
    facts = default_facts(host)
    needs: dict[str, int] = {facts.expand(host.state_dir): 0}
    models = {
        m
        for s in fleet.services.values()
        if s.host == name
        for m in (s.model, s.speculative.draft_model if s.speculative else None)
        if m is not None and m in fleet.models
    }
    for model in sorted(models):
        folder = model_dir_on(
            model, fleet.models[model], home=facts.home, cache_dir=facts.cache_dir
        )
        try:
            size = sum(f.size for f in declared_files(fleet.models[model], loaded.root))
        except FleetError:
            size = 0  # `inferfleet check` reports an unreadable manifest
        needs[folder] = needs.get(folder, 0) + size
    return needs


def _env_readers(loaded: Any, name: str) -> dict[str, str]:
    """The env files apply reads as the host's user, each with what reads it: a settings
    file's values (L-54) and a process-backend service's secrets (L-55). A unit's
    ``secrets_env`` is read by systemd itself (root may own it), so it is not listed."""
    from inferfleet.render.facts import default_facts, fleet_relative

    fleet = loaded.fleet
    facts = default_facts(fleet.hosts[name])
    found: dict[str, str] = {}
    for service_name, service in sorted(fleet.services.items()):
        if service.host != name:
            continue
        for spec in service.settings:
            for path in spec.env_files:
                found.setdefault(
                    fleet_relative(facts, path), f"apply renders {spec.dest} of {service_name}"
                )
        if service.secrets_env is not None and service.backend == "process":
            found.setdefault(
                facts.expand(service.secrets_env), f"apply starts {service_name} with its secrets"
            )
    return found


def _remote(loaded: Any, name: str, folders: list[str], env_files: list[str]) -> Facts:
    """``doctor --local --json`` on the host, over the deploy's ssh connector."""
    from pydantic import TypeAdapter

    from inferfleet.deploy.errors import RemoteError
    from inferfleet.deploy.rollout import remote_command
    from inferfleet.deploy.ssh import connector_for, quote_path
    from inferfleet.doctor.parse import Facts
    from inferfleet.documents import DoctorDocument

    typed = TypeAdapter(DoctorDocument)  # a remote's answer is outside input: typed first

    connector = connector_for(name, loaded.fleet.hosts[name])
    command = f"{remote_command(loaded.fleet.hosts[name])} doctor --local --json"
    command += "".join(f" --disk {quote_path(f)}" for f in folders)
    command += "".join(f" --env-file {quote_path(f)}" for f in env_files)
    try:
        done = connector.run(command, timeout=REMOTE_TIMEOUT, check=False)
    finally:
        connector.close()
    try:
        doc = typed.validate_python(json.loads(done.stdout))
        return Facts.from_json(dict(doc["hosts"][0]["facts"]))
    except (ValueError, IndexError, TypeError):  # pydantic's ValidationError is a ValueError
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise RemoteError(
            f"inferfleet doctor on {name} did not answer with its facts (status {done.returncode})",
            where=f"host {name}",
            hint=f"install it there with `inferfleet host bootstrap {name}` (its venv: "
            f"{loaded.fleet.hosts[name].venv}), or name it with INFERFLEET_REMOTE_COMMAND",
            log_tail=tail,
        ) from None


def _show(value: object) -> str:
    """Text from a host (possibly a remote one) for the terminal: printable, markup escaped."""
    return esc("".join(c for c in str(value) if c.isprintable())[:400])


def print_report(out: Output, report: Any) -> None:
    facts = report["facts"]
    out.line(
        f"[bold]{_show(report['host'])}[/bold] ({'this machine' if report['local'] else 'ssh'})"
    )
    if facts["gpu_source"] is None:
        out.line("  GPUs: none found (no nvidia-smi, amd-smi, rocm-smi or amdgpu sysfs answered)")
    for gpu in facts["gpus"]:
        gtt = f", GTT {gpu['gtt'] / 2**30:.1f} GiB" if gpu["gtt"] is not None else ""
        apu = " (APU, L-31)" if gpu["unified"] else ""
        out.line(
            f"  GPU {gpu['vendor']}:{gpu['index']} {_show(gpu['name'])}: "
            f"{gpu['memory'] / 2**30:.1f} GiB{gtt}{apu} [{gpu['source']}]"
        )
    for note in facts["gpu_notes"]:
        out.line(f"  [yellow]note[/yellow]: {_show(note)}")
    memlock = "unlimited" if facts["memlock"] is None else f"{facts['memlock'] / 2**20:.0f} MiB"
    out.line(
        f"  RAM {facts['ram'] / 2**30:.1f} GiB ({facts['available'] / 2**30:.1f} available), "
        f"swap {facts['swap_total'] / 2**30:.1f} GiB, memlock {memlock}"
    )
    out.line(
        f"  Python {facts['python']}, podman {facts['podman'] or 'not installed'}, "
        f"linger {'on' if facts['linger'] else 'off'} for {_show(facts['user'])}, "
        f"systemd user instance {'running' if facts['user_systemd'] else 'not running'}, "
        f"SELinux {facts.get('selinux', 'disabled')}"
    )
    for disk in facts["disks"]:
        free = "?" if disk["free"] is None else f"{disk['free'] / 2**30:.1f} GiB free"
        out.line(f"  disk {_show(disk['path'])}: {free}")
    for env in facts.get("env_files", []):
        said = "readable" if env["problem"] is None else env["problem"]
        out.line(f"  env file {_show(env['path'])}: {_show(said)}")
    for finding in report["findings"]:
        colour = {"error": "red", "warning": "yellow"}.get(finding["severity"], "blue")
        lesson = f" ({finding['lesson']})" if finding["lesson"] else ""
        out.line(
            f"  [{colour}]{finding['severity']}[/{colour}] {_show(finding['where'])}: "
            f"{_show(finding['message'])}{lesson}\n      fix: {_show(finding['fix'])}"
        )
    if report["devices_yaml"]:
        out.line("  devices for the fleet file:")
        out.line("\n".join("    " + _show(line) for line in report["devices_yaml"].splitlines()))
