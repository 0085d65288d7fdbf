"""Verified means verified, on disk too, with real files and a real repo.

`render --out` removes only files it wrote, inside the output folder: a
manifest naming ``../../x`` or an absolute path is refused before anything is
written or deleted. The trees ``deploy --dry-run`` exports live in a private
folder, checked like the ssh control folder (ours, mode 0700, not a symlink).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest
from deploy_repo import FleetRepo
from helpers import ROOT

from inferfleet.deploy import rollout
from inferfleet.deploy.errors import SshError
from inferfleet.deploy.ssh import control_dir
from inferfleet.errors import FleetError, UsageError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.io.files import private_dir

HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"


def _render(cli, out: Path):
    return cli("render", "--file", str(HOMELAB), "--out", str(out), "--json")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize(
    "hostile",
    [
        "../victim.txt",
        "../../victim.txt",
        "sub/../../victim.txt",
        "ABSOLUTE",
        "link/victim.txt",  # through a symlink that leads out
        "",
        ".",
        "MANIFEST.json",
        "a\nb",
    ],
)
def test_render_out_refuses_a_manifest_naming_files_outside_and_deletes_nothing(
    tmp_path: Path, cli, hostile: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "work" / "out"
    assert _render(cli, out).code == 0
    (out / "link").symlink_to(outside)
    manifest = json.loads((out / "MANIFEST.json").read_text())
    path = str(victim) if hostile == "ABSOLUTE" else hostile
    manifest["files"].append({"path": path, "sha256": "0" * 64, "kind": "env"})
    (out / "MANIFEST.json").write_text(json.dumps(manifest))
    before = _snapshot(tmp_path)

    result = _render(cli, out)
    assert result.code == 2, result.stdout
    text = result.stdout + result.stderr
    assert "is not a file inside" in text and "nothing was written or removed" in text
    assert "Traceback" not in text
    assert _snapshot(tmp_path) == before  # nothing deleted, nothing rewritten
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("bad", ["fifo", "huge", "not json", "deep"])
def test_render_out_refuses_a_manifest_it_cannot_read_as_its_own(
    tmp_path: Path, cli, bad: str
) -> None:
    """A manifest that is a FIFO (which would hang a plain read), too large, not JSON or
    nested without end is refused with the fix, before anything is written or removed."""
    out = tmp_path / "out"
    assert _render(cli, out).code == 0
    manifest = out / "MANIFEST.json"
    manifest.unlink()
    if bad == "fifo":
        os.mkfifo(manifest)
    elif bad == "huge":
        manifest.write_bytes(b" " * (16 << 20) + b"{}")
    elif bad == "not json":
        manifest.write_text("{not json")
    else:
        manifest.write_text("[" * 100 + "]" * 100)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}

    result = _render(cli, out)
    assert result.code == 2, result.stdout
    text = " ".join((result.stdout + result.stderr).split())
    assert "render manifest" in text and "render into an empty directory" in text, text
    assert "Traceback" not in text
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


def test_render_out_removes_only_what_it_wrote(tmp_path: Path, cli) -> None:
    out = tmp_path / "out"
    assert _render(cli, out).code == 0
    manifest = json.loads((out / "MANIFEST.json").read_text())
    ours = out / "gone-ours.env"
    ours.write_text("x=1\n")
    edited = out / "gone-edited.env"
    edited.write_text("x=1\n")
    digest = hashlib.sha256(b"x=1\n").hexdigest()
    manifest["files"] += [
        {"path": "gone-ours.env", "sha256": digest, "kind": "env"},
        {"path": "gone-edited.env", "sha256": digest, "kind": "env"},
        {"path": "gone-link.env", "sha256": digest, "kind": "env"},
    ]
    (out / "MANIFEST.json").write_text(json.dumps(manifest))
    edited.write_text("x=2  # edited by hand\n")
    (out / "gone-link.env").symlink_to(ours)
    assert _render(cli, out).code == 0
    assert not ours.exists()  # listed, unchanged: removed
    assert edited.read_text().startswith("x=2")  # changed since: left alone
    assert (out / "gone-link.env").is_symlink()  # never written by render: left alone


def test_private_dir_refuses_symlinks_foreign_modes_and_files(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    link = tmp_path / "planted"
    link.symlink_to(real)
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o755)
    afile = tmp_path / "afile"
    afile.write_text("")
    for folder, problem in (
        (link, "it is a symlink"),
        (loose, "mode 755 lets others in"),
        (afile, "cannot be used as a private folder"),
    ):
        with pytest.raises(UsageError, match=problem) as caught:
            private_dir(folder, error=UsageError, hint="remove it")
        assert caught.value.where == str(folder) and caught.value.hint == "remove it"
    made = private_dir(tmp_path / "new" / "deep", error=UsageError, hint="")
    assert made.is_dir() and (made.stat().st_mode & 0o777) == 0o700


def test_the_ssh_control_folder_refuses_a_planted_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "ctl").symlink_to(tmp_path / "real")
    monkeypatch.setenv("INFERFLEET_SSH_CONTROL_DIR", str(tmp_path / "ctl"))
    with pytest.raises(SshError, match="is a symlink"):
        control_dir()


def test_a_dry_runs_exported_tree_lives_in_a_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = FleetRepo.create(tmp_path / "fleet", {"version": 1, "hosts": {}}, hosts=["h1"])
    repo.fleet_file.write_text(repo.fleet_file.read_text() + "\n# uncommitted\n")  # dirty
    shared_tmp = tmp_path / "shared-tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))  # where gettempdir() points
    side = rollout.Fleetside.of(load_fleet(repo.fleet_file))
    base = shared_tmp / f"inferfleet-tree-{os.getuid()}"

    # Another user planted the folder as a symlink to a tree of their choosing: refused.
    planted = tmp_path / "attacker"
    (planted / side.revision).mkdir(parents=True)
    base.symlink_to(planted)
    with pytest.raises(FleetError, match="not a private folder of this user"):
        rollout._tree_at_head(side)
    base.unlink()

    root = rollout._tree_at_head(side)
    assert root.is_relative_to(base)
    assert (base.stat().st_mode & 0o777) == 0o700 and not base.is_symlink()
    assert "# uncommitted" not in (root / repo.fleet_file.name).read_text()
