"""A host that enforces SELinux (``hosts.<h>.selinux``): every bind mount of its containers
carries podman's shared label option ``z``, in Quadlet files, in units that run ``podman
run``, and on the front door's own mounts; a host without it keeps podman's default (labels
untouched), byte for byte. Podman's own Quadlet generator reads the relabelled files."""

from __future__ import annotations

import os
from pathlib import Path

from render_helpers import quadlet_proxy_fleet, render, run

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.bundle import Artifact, render_fleet
from inferfleet.render.launch import mount_spec
from inferfleet.render.unitfile import split_command


def selinux_fleet(tmp_path: Path, selinux: bool = True) -> Path:
    """Containers under Quadlet and under systemd's podman run, the proxy's rootless."""
    return quadlet_proxy_fleet(tmp_path, "user", selinux=selinux)


def volumes(artifact: Artifact) -> list[str]:
    """Every bind mount an artifact gives podman: Quadlet ``Volume=`` and ``--volume``."""
    found = []
    for line in artifact.content.splitlines():
        key, _, value = line.partition("=")
        if key == "Volume":
            found.append(value)
        elif key == "ExecStart" and "--volume" in value:
            words = split_command(value)
            found += [words[i + 1] for i, w in enumerate(words) if w == "--volume"]
    return found


def mounting(artifacts: list[Artifact]) -> dict[str, list[str]]:
    return {a.path: v for a in artifacts if a.kind in {"quadlet", "systemd"} if (v := volumes(a))}


def test_every_mount_of_an_selinux_host_is_relabelled_shared(tmp_path: Path) -> None:
    on = mounting(render_fleet(load_fleet(selinux_fleet(tmp_path))))
    assert "hosts/lab/caddy/inferfleet-proxy.container" in on  # the front door's too
    assert any("/systemd/" in path for path in on)  # a unit's podman run
    assert sum(len(v) for v in on.values()) >= 5
    for path, specs in on.items():
        for spec in specs:
            options = spec.split(":")[2].split(",") if spec.count(":") == 2 else []
            assert options[-1:] == ["z"], f"{path}: {spec}"
    # The same fleet without it: the same mounts, podman's default (no relabel).
    off_dir = tmp_path / "off"
    off_dir.mkdir()
    off = mounting(render_fleet(load_fleet(selinux_fleet(off_dir, selinux=False))))
    assert set(off) == set(on)
    for path, specs in off.items():
        assert [s.removesuffix(",z").removesuffix(":z") for s in on[path]] == specs
        assert not any(s.endswith("z") for s in specs)


def test_the_goldens_without_selinux_are_unchanged() -> None:
    assert all(not s.endswith("z") for a in render("runtimes") for s in volumes(a))


def test_the_mount_options_are_podmans() -> None:
    assert mount_spec("/m", "/models", read_only=True, relabel=True) == "/m:/models:ro,z"
    assert mount_spec("/c", "/cache", read_only=False, relabel=True) == "/c:/cache:z"
    assert mount_spec("/c", "/cache", read_only=False, relabel=False) == "/c:/cache"


def test_podmans_quadlet_generator_passes_the_relabelled_mounts(
    quadlet: str, tmp_path: Path
) -> None:
    files = [a for a in render_fleet(load_fleet(selinux_fleet(tmp_path))) if a.kind == "quadlet"]
    assert len(files) >= 2  # a service's and the proxy's
    folder = tmp_path / "units"
    folder.mkdir()
    for artifact in files:
        (folder / Path(artifact.path).name).write_text(artifact.content)
    env = {**os.environ, "QUADLET_UNIT_DIRS": str(folder)}
    result = run([quadlet, "-dryrun"], env=env)
    assert result.returncode == 0, result.stderr
    for artifact in files:
        for spec in volumes(artifact):
            assert f"-v {spec}" in result.stdout, spec
