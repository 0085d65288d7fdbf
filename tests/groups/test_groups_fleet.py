"""Swap groups in the fleet file: validation, rendered presets, budget and the memory rule."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from group_fleet import BIG, BIG_ALIAS, GROUP, SMALL, SMALL_ALIAS, group_data, write
from helpers import quadlet_generator, require
from helpers.cli import CliResult

from inferfleet import paths
from inferfleet.deploy.actions import retire_actions, service_actions
from inferfleet.deploy.inputs import ServiceInputs
from inferfleet.deploy.markers import Marker
from inferfleet.deploy.state import ServiceState
from inferfleet.errors import SpecError, UsageError
from inferfleet.fleetfile.groups import deploy_units, unit_service
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.bundle import render_fleet
from inferfleet.render.facts import default_facts
from inferfleet.render.pipeline import service_launch
from inferfleet.runtimes.pinned import build_relpath

Cli = Callable[..., CliResult]
MODEL = "gemma-3-270m-q4_k_m.gguf"
REV = "a" * 40
IMAGE = "ghcr.io/ggml-org/llama.cpp@sha256:" + "3" * 64


def _load(tmp_path: Path, data: dict[str, Any]) -> Any:
    return load_fleet(write(tmp_path / "fleet.yaml", data))


def _refused(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, data)
    return caught.value.render()


# ---------------------------------------------------------------- validation


def test_a_group_is_one_unit_and_its_members_stay_services(tmp_path: Path) -> None:
    fleet = _load(tmp_path, group_data(8090)).fleet
    assert deploy_units(fleet) == [GROUP]
    assert set(fleet.services) == {SMALL, BIG}
    unit = unit_service(fleet, GROUP)
    assert (unit.host, unit.port, unit.alias, unit.ctx_per_slot) == (
        "local",
        8090,
        SMALL_ALIAS,
        2048,
    )


def _two_hosts(data: dict[str, Any]) -> None:
    data["hosts"]["other"] = {"address": "10.0.0.2", "devices": data["hosts"]["local"]["devices"]}
    data["services"][BIG]["host"] = "other"


def _two_runtimes(data: dict[str, Any]) -> None:
    data["runtimes"]["vllm"] = {"kind": "vllm", "binary": "/opt/vllm/bin/vllm"}
    data["services"][BIG]["runtime"] = "vllm"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            _two_hosts,
            [
                "service 'big' in group 'swap' has host 'other' but member 'small' has 'local'",
                "a group spans one host",
            ],
        ),
        (
            _two_runtimes,
            [
                "service 'big' in group 'swap' runs on vllm (runtime 'vllm')",
                "one llama-server in router mode",
            ],
        ),
    ],
    ids=["two-hosts", "mixed-runtimes"],
)
def test_check_refuses_a_group_that_is_not_one_llama_server(
    tmp_path: Path, cli: Cli, change: Callable[[dict[str, Any]], None], expected: list[str]
) -> None:
    data = group_data(8090)
    change(data)
    fleet_file = write(tmp_path / "fleet.yaml", data)
    before = fleet_file.read_bytes()
    result = cli("check", str(fleet_file))
    assert result.code == 2
    text = " ".join((result.stdout + result.stderr).split())
    for part in expected:
        assert part in text
    assert "Traceback" not in text
    assert fleet_file.read_bytes() == before


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["services"][BIG].update(port=8091), "has port 8091 but member 'small'"),
        (lambda d: d["services"][BIG].update(group="nope"), "joins group 'nope', which is not"),
        (lambda d: d["groups"][GROUP].update(default="ghost"), "default member 'ghost'"),
        (
            lambda d: d["groups"][GROUP].update(resident=[BIG]),
            "2 members load at start (resident and default) but max_loaded is 1",
        ),
        (lambda d: d["groups"][GROUP].update(idle_unload="0s"), "idle_unload must be at least 1s"),
    ],
)
def test_bad_groups_are_refused_with_the_reason(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    data = group_data(8090)
    change(data)
    assert expected in " ".join(_refused(tmp_path, data).split())


def test_members_share_the_port_without_a_clash_but_others_do_not(tmp_path: Path) -> None:
    data = group_data(8090)
    data["services"]["alone"] = {**data["services"][SMALL], "group": None, "alias": "x"}
    assert "port 8090 on host 'local' is already used" in _refused(tmp_path, data)


# ---------------------------------------------------------------- render


def test_presets_carry_each_members_single_model_flags(tmp_path: Path) -> None:
    data = group_data(8090, idle_unload="90s")
    data["services"][BIG]["extra_args"] = ["--ubatch-size", "256"]
    loaded = _load(tmp_path, data)
    host = loaded.fleet.hosts["local"]
    facts = default_facts(host)
    arts = {a.kind: a for a in render_fleet(loaded, GROUP, {"local": facts})}
    model = f"{facts.cache_dir}/models/gemma3-270m/{MODEL}"
    where = f"{facts.home}/.config/inferfleet/presets/{GROUP}.ini"
    assert arts["preset"].install == where
    assert arts["preset"].content == (
        f"; llama-server router presets of swap group {GROUP}, rendered by inferfleet\n"
        "version = 1\n"
        "\n"
        f"[{SMALL_ALIAS}]\n"
        f"model = {model}\n"
        "ctx-size = 2048\nparallel = 1\nno-kv-unified = true\n"
        "cache-type-k = f16\ncache-type-v = f16\nflash-attn = auto\n"
        "cors-origins = none\nno-cors-credentials = true\nmetrics = true\n"
        "device = none\nn-gpu-layers = 0\n"
        "sleep-idle-seconds = 90\nload-on-startup = true\nstop-timeout = 10\n"
        "\n"
        f"[{BIG_ALIAS}]\n"
        f"model = {model}\n"
        "ctx-size = 8192\nparallel = 2\nno-kv-unified = true\n"
        "cache-type-k = q8_0\ncache-type-v = f16\nflash-attn = auto\n"
        "cors-origins = none\nno-cors-credentials = true\nmetrics = true\n"
        "device = none\nn-gpu-layers = 0\nubatch-size = 256\n"
        "sleep-idle-seconds = 90\nstop-timeout = 10\n"
    )
    launch = service_launch(loaded.fleet, loaded.root, GROUP, facts)
    source = loaded.fleet.runtimes["llama-cpp"].source
    binary = f"{facts.cache_dir}/{build_relpath(source)}/bin/llama-server"
    assert launch.argv == [
        binary, "--host", "127.0.0.1", "--port", "8090",
        "--models-preset", where, "--models-max", "1",
        "--cors-origins", "none", "--no-cors-credentials",
    ]  # fmt: skip
    # The router's Hub paths are closed in its environment (render/router.py).
    assert launch.env["MODEL_ENDPOINT"] == "http://127.0.0.1:1/"
    # The process backend installs the presets too; they are part of the spec digest.
    assert [(f.path, f.kind) for f in launch.files] == [(where, "preset")]
    data["services"][BIG]["ctx_per_slot"] = 8192
    changed = service_launch(_load(tmp_path, data).fleet, loaded.root, GROUP, facts)
    assert changed.spec != launch.spec


def test_resident_members_never_sleep(tmp_path: Path) -> None:
    data = group_data(8090, idle_unload="5m", max_loaded=2, resident=[BIG])
    loaded = _load(tmp_path, data)
    (preset,) = [a for a in render_fleet(loaded, GROUP) if a.kind == "preset"]
    small, big = preset.content.split(f"[{BIG_ALIAS}]")
    assert "sleep-idle-seconds = 300\nload-on-startup = true" in small
    assert "sleep-idle-seconds" not in big and "load-on-startup = true" in big


def test_a_member_flag_given_twice_cannot_be_a_preset(tmp_path: Path) -> None:
    data = group_data(8090)
    data["services"][BIG]["extra_args"] = ["--lora", "a.gguf", "--lora", "b.gguf"]
    loaded = _load(tmp_path, data)
    with pytest.raises(UsageError, match="passes --lora twice"):
        render_fleet(loaded, GROUP)


def test_a_systemd_group_unit_passes_systemd_analyze(tmp_path: Path) -> None:
    analyze = require("systemd-analyze", "systemd")
    loaded = _load(tmp_path, group_data(8090, backend="systemd"))
    # The real runtime binary, so ExecStart exists for the verifier.
    facts = replace(
        default_facts(loaded.fleet.hosts["local"]),
        home=str(tmp_path / "home"),
        cache_dir=str(paths.cache_dir()),
    )
    arts = render_fleet(loaded, GROUP, {"local": facts})
    (unit,) = [a for a in arts if a.kind == "systemd"]
    assert "/systemd-user/" in unit.path
    assert "--models-preset" in unit.content
    path = tmp_path / Path(unit.path).name
    path.write_text(unit.content)
    runtime_dir = tmp_path / "xdg"
    runtime_dir.mkdir()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir)}
    result = subprocess.run(
        [analyze, "--user", "verify", "--man=no", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and output == "", output
    launch = service_launch(loaded.fleet, loaded.root, GROUP, facts)
    assert {f.kind for f in launch.files} == {"env", "preset", "systemd"}


# ---------------------------------------------------------------- budget and check


def test_budget_sizes_a_group_as_its_larger_member(tmp_path: Path, cli: Cli) -> None:
    fleet_file = write(tmp_path / "fleet.yaml", group_data(8090))
    result = cli("budget", "-f", str(fleet_file), "--json")
    assert result.code == 0, result.stderr
    doc = result.document()
    used = {s["service"]: sum(d["used"] for d in s["devices"]) for s in doc["services"]}
    assert used[BIG] > used[SMALL] > 0
    (group,) = doc["groups"]
    assert group["bytes"] == used[BIG] and group["counted"] == [BIG]
    human = cli("budget", "-f", str(fleet_file))
    assert f"group {GROUP}:" in human.stdout and "1 at once: big" in human.stdout


@pytest.mark.parametrize(("max_loaded", "fits"), [(1, True), (0, False)])
def test_the_memory_rule_counts_the_largest_simultaneous_set(
    tmp_path: Path, cli: Cli, max_loaded: int, fits: bool
) -> None:
    # 1400 MiB with the 1 GiB headroom: one member fits (~302 MiB), both (~580) do not.
    data = group_data(8090, max_loaded=max_loaded)
    data["hosts"]["local"]["devices"][0]["memory"] = "1400MiB"
    fleet_file = write(tmp_path / "fleet.yaml", data)
    result = cli("check", str(fleet_file), "--json")
    doc = result.document()
    hits = [f for f in doc["findings"] if f["rule"] == "device-memory-fit"]
    assert (hits == []) is fits, hits
    if not fits:
        assert "small" in hits[0]["message"] and "big" in hits[0]["message"]


def test_members_are_scraped_through_the_router_without_loading_them(tmp_path: Path) -> None:
    promtool = require("promtool", "prometheus")
    loaded = _load(tmp_path, group_data(8090))
    arts = {a.path: a for a in render_fleet(loaded)}
    config = yaml.safe_load(arts["monitoring/prometheus.yml"].content)
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    big = jobs["inferfleet-big"]
    # Without autoload=false a scrape would load the member (and evict the other).
    assert big["params"] == {"model": [BIG_ALIAS], "autoload": ["false"]}
    assert big["static_configs"][0]["labels"]["group"] == GROUP
    rules = arts["monitoring/rules/inferfleet.rules.yml"].content
    assert 'up{job=~"inferfleet-.+", group=""} == 0' in rules
    for path in ("monitoring/prometheus.yml", "monitoring/rules/inferfleet.rules.yml"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(arts[path].content)
    for args in (["check", "config"], ["check", "rules"]):
        target = "prometheus.yml" if args[1] == "config" else "rules/inferfleet.rules.yml"
        done = subprocess.run(
            [promtool, *args, str(tmp_path / "monitoring" / target)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_quadlet_group_runs_the_router_in_the_runtime_image(tmp_path: Path) -> None:
    quadlet = quadlet_generator()
    data = group_data(8090, backend="quadlet")
    data["runtimes"]["llama-cpp"] = {"kind": "llama.cpp", "image": IMAGE}
    template = tmp_path / "templates" / "big.jinja"
    template.parent.mkdir(parents=True)
    template.write_text("{{ messages }}")
    data["services"][BIG]["chat_template_file"] = "templates/big.jinja"
    loaded = _load(tmp_path, data)
    facts = default_facts(loaded.fleet.hosts["local"])
    arts = {a.kind: a for a in render_fleet(loaded, GROUP, {"local": facts})}
    text = arts["quadlet"].content
    preset_host = f"{facts.home}/.config/inferfleet/presets/{GROUP}.ini"
    assert f"Volume={preset_host}:/etc/inferfleet/presets.ini:ro" in text
    assert f"Volume={facts.cache_dir}/models/gemma3-270m:/models/gemma3-270m:ro" in text
    assert "/etc/inferfleet/templates/big.jinja:ro" in text
    assert "--models-preset /etc/inferfleet/presets.ini" in text
    preset = arts["preset"].content
    assert "model = /models/gemma3-270m/gemma-3-270m-q4_k_m.gguf" in preset
    assert "chat-template-file = /etc/inferfleet/templates/big.jinja" in preset
    folder = tmp_path / "quadlet"
    folder.mkdir()
    (folder / Path(arts["quadlet"].path).name).write_text(text)
    result = subprocess.run(
        [quadlet, "-dryrun", "-user"],
        capture_output=True,
        text=True,
        env={**os.environ, "QUADLET_UNIT_DIRS": str(folder)},
        check=False,
    )
    problems = [line for line in result.stderr.splitlines() if "Loading source unit" not in line]
    assert result.returncode == 0 and not problems, result.stderr
    assert f"--name inferfleet-{GROUP}" in result.stdout


# ---------------------------------------------------------------- deploy actions


def test_a_changed_member_reinstalls_the_presets_and_restarts_the_router(tmp_path: Path) -> None:
    loaded = _load(tmp_path, group_data(8090))
    facts = default_facts(loaded.fleet.hosts["local"])
    launch = service_launch(loaded.fleet, loaded.root, GROUP, facts)
    (preset,) = launch.files
    running = ServiceState(GROUP, 42, process_spec="old", healthy=True)
    kinds = [a.kind for a in service_actions(launch, running, [], REV)]
    assert kinds == ["stop", "wait-port", "install", "start", "marker"]
    installed = next(a for a in service_actions(launch, running, [], REV) if a.kind == "install")
    assert installed.target == preset.path
    same = replace(running, process_spec=launch.spec, files={preset.path: preset.sha256})
    assert [a.kind for a in service_actions(launch, same, [], REV)] == ["verify", "marker"]


def test_retiring_a_process_group_removes_its_presets_without_systemctl() -> None:
    where = "/home/u/.config/inferfleet/presets/swap.ini"
    marker = Marker(
        service=GROUP,
        host="local",
        revision=REV,
        inputs=ServiceInputs({}, {}),
        backend="process",
        bind="127.0.0.1",
        port=8090,
        health_path="/health",
        applied_at=0.0,
        by="ops@laptop",
        installed=[where],
    )
    actions = retire_actions(marker, ServiceState(GROUP))
    assert [(a.kind, a.target) for a in actions] == [("uninstall", where), ("forget", "")]


def test_show_names_the_group_and_its_members(tmp_path: Path, cli: Cli) -> None:
    fleet_file = write(tmp_path / "fleet.yaml", group_data(8090))
    group = cli("show", GROUP, "-f", str(fleet_file))
    assert group.code == 0, group.stderr
    assert "members" in group.stdout and "small, big" in group.stdout
    assert "--models-max" in group.stdout
    doc = cli("show", GROUP, "-f", str(fleet_file), "--json").document()
    assert doc["service"] == GROUP and "--models-preset" in doc["argv"]
    member = cli("show", BIG, "-f", str(fleet_file))
    assert f"{GROUP} (its preset carries the flags below)" in member.stdout
