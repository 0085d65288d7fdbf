"""systemd units and Quadlet files, checked by the real tools.

``systemd-analyze verify`` exits 0 on warnings (unknown keys, bad values), so
ANY output is a failure here. Quadlet's own generator parses every
``.container`` file (``-dryrun`` exits 1 on a bad key) and the services it
generates are verified too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from render_helpers import load, render, run, stub_executable

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.bundle import Artifact, render_fleet
from inferfleet.render.facts import default_facts
from inferfleet.render.unitfile import UnitFile, UnitFileError, command_line, split_command

LOADING = "Loading source unit file"


def executables(text: str) -> list[str]:
    """Every program a unit runs (systemd-analyze checks they exist)."""
    found = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in {"ExecStart", "ExecStartPre", "ExecStop", "ExecStopPost"}:
            found.append(split_command(value.lstrip("-"))[0])
    return found


def verify(
    systemd_analyze: str, root: Path, units: list[Artifact], folder: str = "etc/systemd/system"
) -> None:
    for unit in units:
        name = Path(unit.path).name
        (root / folder / name).write_text(unit.content)
        result = run([systemd_analyze, f"--root={root}", "verify", "--man=no", f"/{folder}/{name}"])
        output = (result.stdout + result.stderr).strip()
        assert result.returncode == 0 and output == "", f"{unit.path}:\n{output}"


def system_units(fleet: str) -> list[Artifact]:
    """The fleet's system units: the services' and the front door's (gateway, proxy)."""
    return [
        a
        for a in render(fleet)
        if a.kind == "systemd" and (a.install or "").startswith("/etc/systemd/system/")
    ]


@pytest.mark.parametrize("fleet", ["homelab", "runtimes"])
def test_system_units_pass_systemd_analyze_verify(
    fleet: str, systemd_analyze: str, verify_root: Callable[[list[str]], Path]
) -> None:
    units = system_units(fleet)
    assert units
    if fleet == "runtimes":  # its proxy is a unit of the pinned Caddy
        assert "hosts/lab/caddy/inferfleet-proxy.service" in {u.path for u in units}
    root = verify_root([p for u in units for p in executables(u.content)])
    verify(systemd_analyze, root, units)


def test_user_unit_passes_user_manager_verify(systemd_analyze: str, tmp_path: Path) -> None:
    loaded = load("homelab")
    home = tmp_path / "home" / "ops"
    facts = replace(
        default_facts(loaded.fleet.hosts["nova"]), home=str(home), cache_dir=f"{home}/.cache/if"
    )
    (unit,) = [a for a in render_fleet(loaded, "vision", {"nova": facts}) if a.kind == "systemd"]
    assert "/systemd-user/" in unit.path
    for program in executables(unit.content):
        stub_executable(Path("/"), program)  # under tmp_path: the user manager has no --root
    path = tmp_path / Path(unit.path).name
    path.write_text(unit.content)
    runtime_dir = tmp_path / "xdg"
    runtime_dir.mkdir()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir)}
    result = run([systemd_analyze, "--user", "verify", "--man=no", str(path)], env=env)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and output == "", output


def test_verify_harness_sees_warnings(
    systemd_analyze: str, verify_root: Callable[[list[str]], Path]
) -> None:
    """The check above is real: a unit with a typo produces output and fails it."""
    (unit,) = [u for u in system_units("homelab") if "coder" in u.path]
    broken = replace(unit, content=unit.content.replace("RestartSec=", "RestartSecs="))
    root = verify_root(executables(unit.content))
    with pytest.raises(AssertionError, match="Unknown key"):
        verify(systemd_analyze, root, [broken])


def quadlet_dir(tmp_path: Path, fleet: str) -> tuple[Path, list[Artifact]]:
    folder = tmp_path / f"quadlet-{fleet}"
    folder.mkdir()
    files = [a for a in render(fleet) if a.kind == "quadlet"]
    for artifact in files:
        (folder / Path(artifact.path).name).write_text(artifact.content)
    return folder, files


def generated(output: str) -> dict[str, str]:
    """Split ``quadlet -dryrun`` output into {unit name: text}."""
    units: dict[str, str] = {}
    name = ""
    for line in output.splitlines():
        if line.startswith("---") and line.endswith("---"):
            name = line.strip("-")
            units[name] = ""
        elif name:
            units[name] += line + "\n"
    return units


@pytest.mark.parametrize("fleet", ["homelab", "runtimes"])
def test_quadlet_generator_accepts_every_container_file(
    fleet: str, quadlet: str, tmp_path: Path
) -> None:
    folder, files = quadlet_dir(tmp_path, fleet)
    assert files
    result = run([quadlet, "-dryrun"], env={**os.environ, "QUADLET_UNIT_DIRS": str(folder)})
    problems = [line for line in result.stderr.splitlines() if LOADING not in line]
    assert result.returncode == 0 and not problems, result.stderr
    units = generated(result.stdout)
    assert sorted(units) == sorted(Path(f.path).stem + ".service" for f in files)
    for artifact in files:
        text = units[Path(artifact.path).stem + ".service"]
        exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
        argv = split_command(exec_start.removeprefix("ExecStart="))
        name = Path(artifact.path).stem.removeprefix("inferfleet-")
        exec_line = [line for line in artifact.content.splitlines() if line.startswith("Exec=")]
        if exec_line:  # the server's argv reaches podman run intact, after the image
            ours = split_command(exec_line[0].removeprefix("Exec="))
            assert argv[-len(ours) :] == ours
        assert f"--name inferfleet-{name}" in exec_start


@pytest.mark.parametrize("fleet", ["homelab", "runtimes"])
def test_services_quadlet_generates_pass_verify(
    fleet: str,
    quadlet: str,
    systemd_analyze: str,
    tmp_path: Path,
    verify_root: Callable[[list[str]], Path],
) -> None:
    folder, _ = quadlet_dir(tmp_path, fleet)
    out = tmp_path / "generated"
    out.mkdir()
    result = run([quadlet, str(out)], env={**os.environ, "QUADLET_UNIT_DIRS": str(folder)})
    assert result.returncode == 0, result.stderr
    services = sorted(out.glob("*.service"))
    assert services
    units = [Artifact(p.name, p.read_text(), "systemd") for p in services]
    root = verify_root([p for u in units for p in executables(u.content)])
    verify(systemd_analyze, root, units)


def test_quadlet_harness_refuses_a_bad_key(quadlet: str, tmp_path: Path) -> None:
    folder, files = quadlet_dir(tmp_path, "homelab")
    target = folder / Path(files[0].path).name
    target.write_text(target.read_text().replace("Pull=missing", "Pul=missing"))
    result = run([quadlet, "-dryrun"], env={**os.environ, "QUADLET_UNIT_DIRS": str(folder)})
    assert result.returncode == 1 and "unsupported key 'Pul'" in result.stderr


TRICKY = ["--x", "a b", 'q"uote', "back\\slash", "100%", "$HOME", "it's", "tab\tx", '{"k":1}', "z"]


def test_command_quoting_round_trips_through_quadlet(quadlet: str, tmp_path: Path) -> None:
    """systemd's own parser (as Quadlet implements it) reads our quoting back exactly."""
    unit = UnitFile(comment="")
    unit.add("Container", "Image", "docker.io/library/alpine@sha256:" + "0" * 64)
    unit.add("Container", "Entrypoint", "/bin/x")
    unit.add("Container", "Exec", command_line(TRICKY))
    (tmp_path / "t.container").write_text(unit.text())
    result = run([quadlet, "-dryrun"], env={**os.environ, "QUADLET_UNIT_DIRS": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    exec_start = next(line for line in result.stdout.splitlines() if line.startswith("ExecStart="))
    argv = split_command(exec_start.removeprefix("ExecStart="))
    assert argv[-len(TRICKY) :] == TRICKY


def test_split_command_inverts_command_line() -> None:
    assert split_command(command_line(TRICKY)) == TRICKY
    with pytest.raises(UnitFileError, match="empty command"):
        command_line([])


def test_empty_argument_is_refused(quadlet: str, tmp_path: Path) -> None:
    """Quadlet drops every word after an empty one; the renderer refuses to write it."""
    unit = UnitFile(comment="")
    unit.add("Container", "Image", "docker.io/library/alpine@sha256:" + "0" * 64)
    unit.add("Container", "Exec", '--x "" --y')
    (tmp_path / "t.container").write_text(unit.text())
    result = run([quadlet, "-dryrun"], env={**os.environ, "QUADLET_UNIT_DIRS": str(tmp_path)})
    exec_start = next(x for x in result.stdout.splitlines() if x.startswith("ExecStart="))
    assert exec_start.endswith(" --x")  # the incident: --y silently dropped
    with pytest.raises(UnitFileError, match="empty argument"):
        command_line(["--x", "", "--y"])


@pytest.mark.parametrize("char", ["\n", "\r", "\0", "\v", "\f", "\x1b", "\x7f", "\x85"])
def test_values_never_span_lines(char: str) -> None:
    with pytest.raises(UnitFileError, match="cannot carry U\\+"):
        UnitFile().add("Service", "Description", f"two{char}lines")


# ---------------------------------------------------------------- what the units say


def unit_of(fleet: str, service: str, kind: str) -> str:
    (artifact,) = [a for a in render(fleet) if a.kind == kind and a.service == service]
    return artifact.content


def lines(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]


def test_system_unit_never_gives_up_and_outlasts_the_engine() -> None:
    text = unit_of("homelab", "coder", "systemd")
    assert lines(text, "StartLimitIntervalSec") == ["0"]  # L-38: no give-up after fast failures
    assert lines(text, "Restart") == ["always"]
    assert lines(text, "User") == ["ops"]
    assert lines(text, "WantedBy") == ["multi-user.target"]
    assert lines(text, "LimitMEMLOCK") == ["infinity"]
    stop = float(lines(text, "TimeoutStopSec")[0].rstrip("s"))
    assert stop > 10  # llama-server's stop grace
    start = float(lines(text, "TimeoutStartSec")[0].rstrip("s"))
    assert start > 600  # the health timeout: a load is never killed (L-34)
    # It binds beyond loopback: its secrets file (its API key, L-58) is required.
    assert lines(text, "EnvironmentFile") == [
        "/etc/inferfleet/env/coder.env",
        "/home/ops/.config/inferfleet/secrets/coder.env",
    ]


def test_user_unit_has_no_user_and_wants_default_target() -> None:
    text = unit_of("homelab", "vision", "systemd")
    assert lines(text, "User") == []
    assert lines(text, "WantedBy") == ["default.target"]
    assert lines(text, "EnvironmentFile") == [
        "/home/ops/.config/inferfleet/env/vision.env",
        "/home/ops/.config/inferfleet/secrets/vision.env",
    ]


def test_secrets_come_from_an_environment_file_not_argv() -> None:
    text = unit_of("runtimes", "big", "systemd")
    # L-06; required ("-" would make it optional): big binds beyond loopback, and without
    # the file its server would start with no API key (L-58).
    assert "/etc/inferfleet/secrets/big.env" in lines(text, "EnvironmentFile")
    assert lines(text, "TimeoutStopSec") == ["120s"]  # the fleet's value, above the grace
    assert lines(text, "Restart") == ["on-failure"] and lines(text, "User") == ["llm"]


def test_podman_unit_clears_its_stale_name_first() -> None:
    text = unit_of("runtimes", "vl", "systemd")
    pre = lines(text, "ExecStartPre")
    assert pre[0] == "-/usr/bin/podman rm -f --ignore inferfleet-vl"  # L-36
    argv = split_command(lines(text, "ExecStart")[0])
    assert argv[:5] == ["/usr/bin/podman", "run", "--rm", "--replace", "--name"]
    assert "/home/svc/.cache/inferfleet/containers/vl:/cache" in argv  # L-37
    assert "HOME=/cache/home" in argv  # L-39, on the cache mount
    assert lines(text, "ExecStop") == ["/usr/bin/podman stop -t 30 inferfleet-vl"]


def test_quadlet_file_pins_caches_home_and_health() -> None:
    text = unit_of("homelab", "chat", "quadlet")
    assert lines(text, "Image")[0].startswith("docker.io/rocm/vllm@sha256:")  # L-42
    assert lines(text, "Pull") == ["missing"]
    assert "/home/ops/.cache/inferfleet/containers/chat:/cache" in lines(text, "Volume")  # L-37
    env = lines(text, "Environment")
    assert "HOME=/cache" in env and "VLLM_CACHE_ROOT=/cache/vllm" in env  # L-39, L-37
    assert lines(text, "Notify") == ["healthy"]
    assert lines(text, "HealthStartPeriod") == ["1200s"]  # health.timeout: 20m (L-34)
    assert float(lines(text, "TimeoutStartSec")[0].rstrip("s")) > 1200
    assert lines(text, "AddDevice") == ["/dev/kfd", "/dev/dri"]
    assert lines(text, "ContainerName") == ["inferfleet-chat"]  # fixed name (L-36)
    assert lines(text, "WantedBy") == ["multi-user.target"]
    assert lines(text, "ShmSize") == ["16g"]


def test_user_quadlet_on_host_network() -> None:
    text = unit_of("runtimes", "sg", "quadlet")
    assert lines(text, "Network") == ["host"] and lines(text, "PublishPort") == []
    assert lines(text, "AddDevice") == ["nvidia.com/gpu=1"]  # CDI name, the device's index
    assert lines(text, "WantedBy") == ["default.target"]
    assert lines(text, "EnvironmentFile") == ["/home/svc/.config/inferfleet/env/sg.env"]


def test_ordinary_container_keeps_its_image_defaults() -> None:
    text = unit_of("homelab", "search", "quadlet")
    assert lines(text, "Entrypoint") == [] and lines(text, "Exec") == []
    assert not any(e.startswith("HOME=") for e in lines(text, "Environment"))
    assert lines(text, "PublishPort") == ["192.168.1.20:8888:8080"]  # its lan bind
    assert lines(text, "HealthCmd") == ["wget -q -O /dev/null http://127.0.0.1:8080/healthz"]


def test_quadlet_health_has_a_fast_startup_check() -> None:
    text = unit_of("homelab", "chat", "quadlet")
    # Until it first passes, the same check every 2 s: systemd sees the start right after
    # the load (Notify=healthy), not up to a HealthInterval later.
    assert lines(text, "HealthStartupCmd") == lines(text, "HealthCmd") != []
    assert lines(text, "HealthStartupInterval") == ["2s"]
    assert lines(text, "Ulimit") == ["memlock=-1:-1"]  # GPUs pin host memory


@pytest.mark.parametrize(("extra_args", "ulimit"), [([], []), (["--mlock"], ["memlock=-1:-1"])])
def test_a_cpu_container_asks_for_unlimited_memlock_only_with_mlock(
    tmp_path: Path, extra_args: list[str], ulimit: list[str]
) -> None:
    """Raising memlock needs CAP_SYS_RESOURCE, which a host may not grant (the tests'
    machine does not): a CPU service without --mlock does not ask."""
    fleet = {
        "version": 1,
        "hosts": {"h": {"address": "10.0.0.2", "ssh": {"user": "ops"}, "become": "sudo"}},
        "runtimes": {"img": {"kind": "llama.cpp", "image": "localhost/l@sha256:" + "a" * 64}},
        "models": {"m": {"source": {"path": str(tmp_path)},
                         "files": [{"path": "m.gguf", "size": 1}]}},
        "services": {"s": {"host": "h", "runtime": "img", "model": "m", "port": 8000,
                           "ctx_per_slot": 1024, "backend": "quadlet",
                           "extra_args": extra_args}},
    }  # fmt: skip
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    (artifact,) = [a for a in render_fleet(load_fleet(path)) if a.kind == "quadlet"]
    assert lines(artifact.content, "Ulimit") == ulimit
    assert lines(artifact.content, "AddDevice") == []


def test_gpu_passthrough_counts_a_vendors_devices_only(tmp_path: Path) -> None:
    """A host that lists its CPU and an AMD card before its NVIDIA card: the NVIDIA card is
    CUDA index 0 (CDI nvidia.com/gpu=0, llama.cpp's CUDA0), as doctor discovers it, not the
    third entry; an explicit index wins."""
    devices = [
        {"name": "cpu0", "vendor": "cpu", "memory": "64GiB"},
        {"name": "a0", "vendor": "amd", "memory": "48GiB"},
        {"name": "n0", "vendor": "nvidia", "memory": "24GiB"},
        {"name": "n1", "vendor": "nvidia", "memory": "24GiB", "index": 3},
    ]
    service = {"host": "h", "runtime": "img", "model": "m", "ctx_per_slot": 1024,
               "backend": "quadlet"}  # fmt: skip
    fleet = {
        "version": 1,
        "hosts": {"h": {"address": "10.0.0.2", "ssh": {"user": "ops"}, "become": "sudo",
                        "devices": devices}},
        "runtimes": {"img": {"kind": "llama.cpp", "image": "localhost/l@sha256:" + "a" * 64}},
        "models": {"m": {"source": {"path": str(tmp_path)},
                         "files": [{"path": "m.gguf", "size": 1}]}},
        "services": {"nv": {**service, "port": 8000, "devices": ["n0"]},
                     "nv3": {**service, "port": 8001, "devices": ["n1"]},
                     "amd": {**service, "port": 8002, "devices": ["a0"]}},
    }  # fmt: skip
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    units = {a.service: a.content for a in render_fleet(load_fleet(path)) if a.kind == "quadlet"}
    assert lines(units["nv"], "AddDevice") == ["nvidia.com/gpu=0"]
    assert "--device CUDA0" in lines(units["nv"], "Exec")[0]
    assert lines(units["nv3"], "AddDevice") == ["nvidia.com/gpu=3"]
    assert lines(units["amd"], "AddDevice") == ["/dev/kfd", "/dev/dri"]
    assert "--device ROCm0" in lines(units["amd"], "Exec")[0]
    assert all(lines(u, "GroupAdd") == ["keep-groups"] for u in units.values())
