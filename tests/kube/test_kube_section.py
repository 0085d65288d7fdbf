"""The kubernetes: section is validated like every section (file:line, a hint), and
`render --target kubernetes` refuses what it cannot do with a clear error, writing nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.cli import CliResult
from kube_fleets import DIGEST, write

from inferfleet.errors import SpecError
from inferfleet.fleetfile.loader import load_fleet


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"kubernetes.namespace": "LLM_Prod"}, "not a Kubernetes namespace name"),
        ({"kubernetes.storage_class": "fast ssd"}, "not a Kubernetes object name"),
        ({"kubernetes.images": {"nope": f"x{DIGEST}"}}, "names runtime 'nope'"),
        ({"kubernetes.volumes": {"nope": "1GiB"}}, "names model 'nope'"),
        ({"kubernetes.tools_image": "-v /:/host"}, "not an image reference"),
        ({"kubernetes.tools_image": None}, "tools_image"),
        ({"kubernetes.replicas": 2}, "replicas"),
        ({"kubernetes.monitoring_pods": {"app": "bad value!"}}, "not a Kubernetes label value"),
    ],
)
def test_bad_section_is_a_spec_error_naming_the_field(
    tmp_path: Path, changes: dict[str, Any], says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        load_fleet(write(tmp_path, changes))
    text = caught.value.render()
    assert says in text
    assert "fleet.yaml" in text


def test_an_image_for_a_runtime_that_has_one_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "runtimes.llama": {"kind": "llama.cpp", "image": f"ghcr.io/ggml/llama{DIGEST}"},
            "kubernetes.images": {"llama": f"example/other{DIGEST}"},
        },
    )
    with pytest.raises(SpecError, match="already runs from image"):
        load_fleet(path)


def _render(cli: Callable[..., CliResult], path: Path, *extra: str) -> CliResult:
    out = path.parent / "out"
    return cli("render", "-f", str(path), "--out", str(out), "--no-check", *extra)


def test_without_the_section_render_says_what_to_declare(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    result = _render(cli, write(tmp_path, {"kubernetes": None}), "--target", "kubernetes")
    assert result.code == 2
    assert "has no kubernetes: section" in result.stderr and "tools_image" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--target", "helm"), "unknown --target 'helm'"),
        (("--namespace", "x"), "--namespace is for --target kubernetes"),
        (("--target", "kubernetes", "svc"), "renders the whole fleet"),
    ],
)
def test_options_that_cannot_work_are_refused(
    tmp_path: Path, cli: Callable[..., CliResult], extra: tuple[str, ...], says: str
) -> None:
    result = _render(cli, write(tmp_path), *extra)
    assert result.code == 2 and says in result.stderr
    assert "Traceback" not in result.stderr


def test_a_device_the_pod_cannot_see_by_index_is_refused(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    result = _render(
        cli, write(tmp_path, {"services.svc.devices": ["b"]}), "--target", "kubernetes"
    )
    assert result.code == 2
    assert "index 1 on the host" in result.stderr and "services.svc.devices" in result.stderr


def test_a_host_folder_volume_is_refused(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    volume = {"volumes": [{"host": "/srv/data", "container": "/data"}]}
    path = write(tmp_path, {"services.svc.container": volume})
    result = _render(cli, path, "--target", "kubernetes")
    assert result.code == 2 and "a pod has no host folders" in result.stderr


def test_the_exportable_fleet_renders(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    result = _render(cli, write(tmp_path), "--target", "kubernetes", "--namespace", "llm")
    assert result.code == 0, result.stderr
    text = (tmp_path / "out" / "services" / "svc.yaml").read_text()
    assert "namespace: llm\n" in text and "nvidia.com/gpu: '1'" in text


@pytest.mark.parametrize(
    ("user", "expected"), [("1000:44", {"runAsUser": 1000, "runAsGroup": 44}), ("ops", None)]
)
def test_container_user_is_numeric_in_a_pod(
    tmp_path: Path, cli: Callable[..., CliResult], user: str, expected: dict[str, int] | None
) -> None:
    result = _render(
        cli, write(tmp_path, {"services.svc.container": {"user": user}}), "--target", "kubernetes"
    )
    if expected is None:
        assert result.code == 2 and "numeric UID[:GID]" in result.stderr
        return
    assert result.code == 0, result.stderr
    docs = list(yaml.safe_load_all((tmp_path / "out/services/svc.yaml").read_text()))
    pod = next(d for d in docs if d["kind"] == "StatefulSet")["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"] == expected


@pytest.mark.parametrize("field", ["monitoring_pods", "monitoring_namespace"])
def test_an_empty_monitoring_selector_is_refused_and_nothing_written(
    tmp_path: Path, cli: Callable[..., CliResult], field: str
) -> None:
    # {} would select every pod (or namespace) of the cluster: all of them could reach
    # the loopback-level services the policies keep to the gateway and the proxy.
    result = _render(cli, write(tmp_path, {f"kubernetes.{field}": {}}), "--target", "kubernetes")
    assert result.code == 2 and "empty label selector" in result.stderr, result.stderr
    assert f"kubernetes.{field}" in result.stderr and "fleet.yaml:" in result.stderr
    assert not (tmp_path / "out").exists()


def test_monitoring_peers_need_the_namespace_and_the_pod_labels_together(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    path = write(tmp_path, {"kubernetes.monitoring_namespace": {"team": "observability"}})
    result = _render(cli, path, "--target", "kubernetes")
    assert result.code == 0, result.stderr
    docs = yaml.safe_load_all((tmp_path / "out" / "network-policies.yaml").read_text())
    peers = [
        peer
        for doc in docs
        for rule in doc["spec"].get("ingress", [])
        for peer in rule["from"]
        if "podSelector" in peer and "namespaceSelector" in peer
    ]
    assert peers, "the metrics rule has one peer with both selectors (an AND, not an OR)"
    for peer in peers:
        assert peer["namespaceSelector"] == {"matchLabels": {"team": "observability"}}
        assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    # No peer lets a pod in by its own labels alone, from any namespace.
    text = (tmp_path / "out" / "network-policies.yaml").read_text()
    assert "namespaceSelector: {}\n      podSelector" not in text
