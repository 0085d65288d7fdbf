"""`up` is `apply` on this machine: one launch, one digest, one executor (real llama-server).

Before the spine, `up` and `apply` each computed their own argv and digest
and restarted each other's servers; a chat template path was resolved
against the checkout by `render` and against the fleet file by `check`.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from helpers.git import git

from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.paths import cache_dir

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def fleet_repo(folder: Path, port: int, *, subdir: str = "", **service: Any) -> Path:
    """The embedded example on ``port``, committed in a fresh git repository."""
    data = yaml.safe_load(embedded_example().read_text())
    data["services"]["gemma"].update(port=port, **service)
    where = folder / subdir if subdir else folder
    where.mkdir(parents=True, exist_ok=True)
    fleet = where / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    git(folder, "init", "-q", "-b", "main")
    return fleet


def commit(folder: Path) -> str:
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "fleet")
    return git(folder, "rev-parse", "HEAD")


def doc(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.stderr + result.stdout
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def running_pid(cli: Any, fleet: Path) -> int | None:
    row = doc(cli("status", "--file", str(fleet), "--json"))["services"][0]
    assert row["state"] in {"healthy", "stopped"}, row
    return row["pid"] if row["state"] == "healthy" else None


def test_up_then_apply_and_apply_then_up_keep_the_same_server(
    cli: Any, tmp_path: Path, port: int, llama_server: Path, servers_of: list[int], monkeypatch
) -> None:
    repo = tmp_path / "fleet"
    fleet = fleet_repo(repo, port)
    head = commit(repo)

    # up, then apply of the same revision: nothing to do, same pid.
    up = doc(cli("up", str(fleet), "--json"))["services"][0]
    servers_of.append(up["pid"])
    assert up["action"] == "started" and up["revision"] == head  # a clean checkout: HEAD
    dry = doc(cli("apply", "--file", str(fleet), "--host", "local", "--dry-run", "--json"))
    assert [(i["service"], i["action"]) for i in dry["plan"]] == [("gemma", "keep")]
    assert dry["actions"] == []
    applied = doc(cli("apply", "--file", str(fleet), "--host", "local", "--json"))
    assert applied["ok"] and applied["done"] == [] and applied["plan"][0]["action"] == "keep"
    # Even asked for by name, apply finds the very launch up started: verified, not restarted.
    forced = doc(cli("apply", "--file", str(fleet), "--host", "local", "-s", "gemma", "--json"))
    assert [o["outcome"] for o in forced["done"]] == ["kept"]
    kinds = [a["kind"] for a in forced["actions"]]
    assert "verify" in kinds and "stop" not in kinds and "start" not in kinds
    assert running_pid(cli, fleet) == up["pid"]
    assert doc(cli("down", "--file", str(fleet), "--json"))["services"][0]["pid"] == up["pid"]

    # apply first (a fresh host state), then up: up finds nothing to change.
    monkeypatch.setenv("INFERFLEET_STATE_DIR", str(tmp_path / "state-2"))
    first = doc(cli("apply", "--file", str(fleet), "--host", "local", "--json"))
    assert [o["outcome"] for o in first["done"]] == ["deployed"]
    pid = running_pid(cli, fleet)
    assert pid is not None
    servers_of.append(pid)
    again = doc(cli("up", str(fleet), "--json"))["services"][0]
    assert again["action"] == "unchanged" and again["pid"] == pid
    assert running_pid(cli, fleet) == pid
    # An uncommitted edit is applied by up and recorded as untracked, never as HEAD.
    data = yaml.safe_load(fleet.read_text())
    data["services"]["gemma"]["parallel"] = 1
    fleet.write_text(yaml.safe_dump(data, sort_keys=False))
    edited = doc(cli("up", str(fleet), "--json"))["services"][0]
    servers_of.append(edited["pid"])
    assert edited["action"] == "restarted" and edited["revision"] == "untracked"
    cli("down", "--file", str(fleet))


def test_up_starts_a_service_with_a_template_and_a_drafter_as_render_and_show_say(
    cli: Any, tmp_path: Path, port: int, llama_server: Path, servers_of: list[int]
) -> None:
    repo = tmp_path / "fleet"
    # The fleet file in a subfolder: its paths are relative to it, for every verb.
    fleet = fleet_repo(
        repo,
        port,
        subdir="site",
        chat_template_file="templates/plain.jinja",
        speculative={"types": ["draft-simple"], "draft_model": "gemma3-270m", "draft_max": 4},
    )
    template = fleet.parent / "templates" / "plain.jinja"
    template.parent.mkdir()
    template.write_text(
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    )
    commit(repo)
    up = doc(cli("up", str(fleet), "--json"))["services"][0]
    servers_of.append(up["pid"])
    assert up["action"] == "started"
    cmdline = psutil.Process(up["pid"]).cmdline()
    assert cmdline[cmdline.index("--chat-template-file") + 1] == str(template)
    assert cmdline[cmdline.index("--spec-type") + 1] == "draft-simple"
    assert "--spec-draft-model" in cmdline

    shown = doc(cli("show", "gemma", "--file", str(fleet), "--json"))
    assert shown["argv"] == cmdline

    # render with this machine's facts writes the same argv up started.
    facts = tmp_path / "facts.yaml"
    facts.write_text(
        yaml.safe_dump(
            {
                "local": {
                    "user": getpass.getuser(),
                    "home": str(Path.home()),
                    "cache_dir": str(cache_dir()),
                    "fleet_dir": str(fleet.parent),
                }
            }
        )
    )
    out = tmp_path / "rendered"
    rendered = cli("render", "--file", str(fleet), "--out", str(out), "--facts", str(facts))
    assert rendered.code == 0, rendered.stderr
    argv = json.loads((out / "hosts" / "local" / "gemma.argv.json").read_text())
    assert (argv["argv"] if isinstance(argv, dict) else argv) == cmdline
    cli("down", "--file", str(fleet))
