"""Render reads only declared files inside the fleet repository (inferfleet.bounded).

A chat template, a settings template or a manifest the fleet file names is
copied into what ``render`` writes (a Kubernetes ConfigMap, a host's
settings file). An absolute path or ``..`` is refused at the schema with
``file:line``; a symlink leading out of the fleet file's folder, a device or
a FIFO is refused where the file is read (without blocking on the FIFO) and
by ``check`` with the field's line; in every case nothing is written and the
target's bytes (here a file standing in for ``/proc/self/environ``) appear
nowhere.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.cli import CliResult
from kube_fleets import write

from inferfleet.errors import FleetError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.facts import default_facts
from inferfleet.render.settings import SettingsError, render_service_settings

SECRET = "HF_TOKEN=hf_" + "s" * 34


def _render(cli: Callable[..., CliResult], path: Path) -> CliResult:
    return cli(
        "render",
        "-f",
        str(path),
        "--out",
        str(path.parent / "out"),
        "--target",
        "kubernetes",
        "--no-check",
    )


@pytest.mark.parametrize(
    "value", ["/proc/self/environ", "../outside.jinja", "~/t.jinja", "a/../../b"]
)
def test_a_template_path_outside_the_repository_is_refused_at_the_schema(
    tmp_path: Path, cli: Callable[..., CliResult], value: str
) -> None:
    path = write(tmp_path, {"services.svc.chat_template_file": value})
    result = cli("validate", str(path))
    assert result.code == 2 and "relative to the fleet file's folder" in result.stderr
    assert f"{path}:" in result.stderr and "chat_template_file" in result.stderr
    assert _render(cli, path).code == 2 and not (tmp_path / "out").exists()


def _secret_outside(tmp_path: Path) -> Path:
    outside = tmp_path / "elsewhere" / "environ"
    outside.parent.mkdir()
    outside.write_text(SECRET)
    return outside


def _hostile(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A fleet whose chat template is a hostile file of ``kind``; (fleet path, what is said)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    target = repo / "t.jinja"
    if kind == "symlink out":
        target.symlink_to(_secret_outside(tmp_path))
        says = "leads outside the fleet file's folder"
    elif kind == "fifo":
        os.mkfifo(target)
        says = "is a FIFO, not a regular file"
    elif kind == "device":
        os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
        says = "is a character device, not a regular file"
    else:
        target.write_text("{{ x }}" * (1 << 18))  # 1.75 MiB
        says = "at most 1,048,576 are read"
    return write(repo, {"services.svc.chat_template_file": "t.jinja"}), says


@pytest.mark.parametrize("kind", ["symlink out", "fifo", "device", "too big"])
def test_a_hostile_template_file_is_refused_by_render_and_check_without_hanging(
    tmp_path: Path, cli: Callable[..., CliResult], kind: str
) -> None:
    path, says = _hostile(tmp_path, kind)
    started = time.monotonic()
    result = _render(cli, path)
    assert time.monotonic() - started < 30, "a FIFO or device must not block the render"
    out = path.parent / "out"
    assert result.code == 2 and says in result.stderr, result.stderr
    assert "services.svc.chat_template_file" in result.stderr
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))
    assert "Traceback" not in result.stderr and SECRET not in result.stdout + result.stderr
    if kind == "too big":
        return
    # check reports the same, as an error at the field's line in the fleet file.
    checked = cli("check", "--json", "--offline", str(path))
    doc = json.loads(checked.stdout)
    (finding,) = [f for f in doc["findings"] if f["rule"] == "chat-template-file-missing"]
    assert finding["severity"] == "error" and says in finding["message"]
    line = path.read_text().splitlines().index("    chat_template_file: t.jinja") + 1
    assert (finding["field"], finding["line"]) == ("services.svc.chat_template_file", line)
    assert checked.code == 1 and SECRET not in checked.stdout


def test_a_manifest_symlinked_out_of_the_repository_is_refused(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.manifest").symlink_to(_secret_outside(tmp_path))
    path = write(repo, {"models.m.files": None, "models.m.manifest": "m.manifest"})
    result = _render(cli, path)
    assert result.code == 2 and "leads outside the fleet file's folder" in result.stderr
    assert not (repo / "out").exists() and SECRET not in result.stdout + result.stderr


def test_a_settings_template_symlinked_out_is_refused_before_anything_renders(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "settings.tmpl").symlink_to(_secret_outside(tmp_path))
    env = repo / "s.env"
    env.write_text("A=1\n")
    settings = [{"template": "settings.tmpl", "dest": "/etc/x/config.yaml", "allow": ["A"]}]
    path = write(repo, {"services.svc.settings": settings})
    loaded = load_fleet(path)
    facts = default_facts(loaded.fleet.hosts["gpu"])
    facts = type(facts)(**{**facts.__dict__, "fleet_dir": str(repo)})
    with pytest.raises(SettingsError, match="leads outside the fleet file's folder") as caught:
        render_service_settings("svc", loaded.fleet.services["svc"], facts, env_files=[env])
    assert isinstance(caught.value, FleetError) and SECRET not in str(caught.value)
    assert caught.value.where == "services.svc.settings[0].template"


def test_a_fifo_given_as_host_facts_or_secrets_env_is_refused_at_once(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    path = write(tmp_path)
    fifo = tmp_path / "facts.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = cli("render", "-f", str(path), "--out", str(tmp_path / "out"), "--facts", str(fifo))
    assert result.code == 2 and "is a FIFO, not a regular file" in result.stderr
    assert not (tmp_path / "out").exists()
    result = cli("secrets", "scan", "--repo", str(tmp_path), "-e", str(fifo))
    assert result.code == 2 and "is a FIFO, not a regular file" in result.stderr
    assert time.monotonic() - started < 30  # no writer ever comes: a blocking open hangs
