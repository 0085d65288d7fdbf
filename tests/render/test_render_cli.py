"""``inferfleet render``, ``diff`` and ``render-settings`` through the real entry point."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from render_helpers import FLEETS, ROOT


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_render_writes_every_artifact_byte_stable(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = cli("render", "--file", str(FLEETS["homelab"]), "--out", str(out), "--json")
    assert first.code == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["schema"] == "inferfleet.render/v1"
    files = snapshot(out)
    assert set(files) == {f["path"] for f in doc["files"]} | {"MANIFEST.json"}
    again = cli("render", "--file", str(FLEETS["homelab"]), "--out", str(out))
    assert again.code == 0 and snapshot(out) == files  # byte-stable
    golden = ROOT / "tests/fixtures/golden/homelab"
    assert files == snapshot(golden)


def test_render_one_service_keeps_the_others(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("render", "--file", str(FLEETS["homelab"]), "--out", str(out)).code == 0
    before = snapshot(out)
    result = cli("render", "coder", "--file", str(FLEETS["homelab"]), "--out", str(out))
    assert result.code == 0, result.stderr
    assert snapshot(out) == before
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert len(manifest["files"]) == len(before) - 1


def test_diff_reports_changes_like_diff1(cli: Any, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    shutil.copytree(FLEETS["homelab"].parent, tmp_path, dirs_exist_ok=True)
    out = tmp_path / "out"
    assert cli("render", "--file", str(fleet), "--out", str(out)).code == 0
    clean = cli("diff", "--file", str(fleet), "--out", str(out))
    assert clean.code == 0 and "no changes" in clean.stdout
    fleet.write_text(fleet.read_text().replace("parallel: 3", "parallel: 4"))
    changed = cli("diff", "coder", "--file", str(fleet), "--out", str(out), "--json")
    assert changed.code == 1
    doc = json.loads(changed.stdout)
    paths = {c["path"]: c for c in doc["changes"]}
    assert set(paths) == {
        "hosts/forge/coder.argv.json",
        "hosts/forge/systemd/inferfleet-coder.service",
    }
    assert '-    "98304",\n+    "131072",' in paths["hosts/forge/coder.argv.json"]["diff"]
    assert (out / "hosts/forge/coder.argv.json").read_text().count("98304") == 1  # untouched


def test_render_refuses_a_fleet_that_fails_check(cli: Any, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    shutil.copytree(FLEETS["homelab"].parent, tmp_path, dirs_exist_ok=True)
    fleet.write_text(
        fleet.read_text().replace("gpu_memory_utilization: 0.92", "gpu_memory_utilization: 1.0")
    )
    out = tmp_path / "out"
    result = cli("render", "--file", str(fleet), "--out", str(out))
    assert result.code == 2
    assert (
        "gpu-memory-utilization-cap (L-32)" in result.stderr and "inferfleet check" in result.stderr
    )
    assert not out.exists()  # nothing half-written


def test_render_with_host_facts_and_bad_facts(cli: Any, tmp_path: Path) -> None:
    facts = tmp_path / "facts.yaml"
    facts.write_text("forge: {user: llm, home: /srv/llm, cache_dir: /var/cache/inferfleet}\n")
    out = tmp_path / "out"
    result = cli(
        "render",
        "coder",
        "--file",
        str(FLEETS["homelab"]),
        "--out",
        str(out),
        "--facts",
        str(facts),
    )
    assert result.code == 0, result.stderr
    unit = (out / "hosts/forge/systemd/inferfleet-coder.service").read_text()
    assert "User=llm" in unit and "ExecStart=/var/cache/inferfleet/runtimes/" in unit
    facts.write_text("nowhere: {user: x}\n")
    bad = cli(
        "render",
        "--file",
        str(FLEETS["homelab"]),
        "--out",
        str(tmp_path / "o2"),
        "--facts",
        str(facts),
    )
    assert bad.code == 2 and "host facts name host 'nowhere'" in bad.stderr
    assert not (tmp_path / "o2").exists()


def test_render_settings_on_the_host(cli: Any, tmp_path: Path) -> None:
    env = tmp_path / "search.env"
    env.write_text("SEARXNG_SECRET=abc123\n")
    dest_root = tmp_path / "host"
    args = ("render-settings", "search", "--file", str(FLEETS["homelab"]), "--env-file", str(env),
            "--dest-root", str(dest_root))  # fmt: skip
    first = cli(*args)
    assert first.code == 0, first.stderr
    (written,) = [p for p in dest_root.rglob("settings.yml")]
    assert 'secret_key: "abc123"' in written.read_text() and "wrote" in first.stdout
    second = cli(*args)
    assert second.code == 0 and "unchanged" in second.stdout
    env.write_text("OTHER=1\n")
    missing = cli(*args)
    assert missing.code == 1 and "unresolved placeholder(s): SEARXNG_SECRET" in missing.stderr
    assert 'secret_key: "abc123"' in written.read_text()  # the good file stays


def test_unknown_service(cli: Any, tmp_path: Path) -> None:
    result = cli("render", "nope", "--file", str(FLEETS["homelab"]), "--out", str(tmp_path))
    assert result.code == 2 and "no service named 'nope'" in result.stderr
