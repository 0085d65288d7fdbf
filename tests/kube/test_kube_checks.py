"""The kube-* check rules (L-09, L-16, L-42): each reproduces the configuration it refuses,
and they judge only a fleet that declares the kubernetes target."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import CliResult
from kube_fleets import DIGEST, write

from inferfleet.checks.engine import catalogue, run_checks
from inferfleet.fleetfile.loader import load_fleet

KUBE_RULES = {"kube-gpu-request", "kube-model-volume", "kube-image-not-pinned"}


def _kube_findings(path: Path) -> list[tuple[str, str]]:
    rules = [r for r in catalogue() if r.id in KUBE_RULES]
    report = run_checks(load_fleet(path), rules=rules)
    return [(f.rule, f.field) for f in report.findings]


def test_rules_are_registered_with_their_lessons() -> None:
    lessons = {r.id: r.lesson for r in catalogue() if r.id in KUBE_RULES}
    assert lessons == {
        "kube-gpu-request": "L-16",
        "kube-model-volume": "L-09",
        "kube-image-not-pinned": "L-42",
    }


def test_an_exportable_fleet_passes(tmp_path: Path) -> None:
    assert _kube_findings(write(tmp_path)) == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # L-16: the argv names CUDA1, but a pod counts its one GPU from 0.
        ({"services.svc.devices": ["b"]}, ("kube-gpu-request", "services.svc.devices")),
        (
            {"hosts.gpu.devices": [
                {"name": "a", "vendor": "nvidia", "memory": "24GiB"},
                {"name": "b", "vendor": "amd", "memory": "24GiB"},
            ], "services.svc.devices": ["a", "b"]},
            ("kube-gpu-request", "services.svc.devices"),
        ),
        (
            {"hosts.gpu.devices": [{"name": "a", "vendor": "intel", "memory": "16GiB"}]},
            ("kube-gpu-request", "services.svc.devices"),
        ),
        # L-09: 3 GiB of declared files do not fit a 2 GiB volume.
        ({"kubernetes.volume_size": "2GiB"}, ("kube-model-volume", "kubernetes.volume_size")),
        ({"kubernetes.volumes": {"m": "1GiB"}}, ("kube-model-volume", "kubernetes.volumes.m")),
        ({"kubernetes.volume_size": None}, ("kube-model-volume", "kubernetes.volumes")),
        ({"models.m.source": {"path": "/srv/m"}}, ("kube-model-volume", "models.m.source")),
        # L-42: a tag moves.
        (
            {"kubernetes.images": {"llama": "example/llama-server:latest"}},
            ("kube-image-not-pinned", "kubernetes.images.llama"),
        ),
        (
            {"kubernetes.tools_image": "example/inferfleet:1.0"},
            ("kube-image-not-pinned", "kubernetes.tools_image"),
        ),
        ({"kubernetes.images": {}}, ("kube-image-not-pinned", "services.svc.runtime")),
        (
            {"gateway": {"host": "gpu", "keys_env": "~/keys.env"}},
            ("kube-image-not-pinned", "kubernetes"),
        ),
    ],
)  # fmt: skip
def test_each_rule_reports_what_cannot_be_exported(
    tmp_path: Path, changes: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert _kube_findings(write(tmp_path, changes)) == [expected]


def test_rules_are_silent_without_the_kubernetes_section(tmp_path: Path) -> None:
    path = write(tmp_path, {"services.svc.devices": ["b"], "kubernetes": None})
    assert _kube_findings(path) == []


def test_render_refuses_what_check_reports(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    path = write(tmp_path, {"kubernetes.images": {"llama": "example/llama-server:latest"}})
    out = tmp_path / "out"
    result = cli("render", "-f", str(path), "--target", "kubernetes", "--out", str(out))
    assert result.code == 2
    assert "kube-image-not-pinned (L-42)" in result.stderr
    assert not out.exists()  # nothing half-written


def test_render_without_check_still_refuses_an_unpinned_image(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    path = write(tmp_path, {"kubernetes.images": {"llama": "example/llama-server:latest"}})
    out = tmp_path / "out"
    args = ("render", "-f", str(path), "--target", "kubernetes", "--out", str(out), "--no-check")
    result = cli(*args)
    assert result.code == 2
    assert "not pinned by digest" in result.stderr and not out.exists()
    assert DIGEST not in result.stderr
