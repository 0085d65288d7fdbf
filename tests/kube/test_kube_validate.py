"""Every rendered object passes the official Kubernetes JSON schemas (pinned version, strict),
and the kustomization builds with kubectl, offline."""

from __future__ import annotations

import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kube_helpers import CRD_KINDS, KUBERNETES_VERSION, objects, render, validate

from inferfleet.cli.render_files import write_bundle


def test_every_object_passes_the_schemas_of_the_pinned_version() -> None:
    found = objects(render())
    checked = [o for o in found if o["kind"] not in CRD_KINDS]
    for obj in checked:
        validate(obj)
    kinds = {o["kind"] for o in checked}
    assert kinds == {
        "ConfigMap",
        "Deployment",
        "Namespace",
        "NetworkPolicy",
        "Service",
        "StatefulSet",
    }


def test_the_validator_refuses_a_broken_object() -> None:
    """The schemas are really applied: a wrong type and an unknown key both fail."""
    statefulset = next(o for o in objects(render()) if o["kind"] == "StatefulSet")
    wrong = yaml.safe_load(yaml.safe_dump(statefulset))
    wrong["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(wrong)
    unknown = yaml.safe_load(yaml.safe_dump(statefulset))
    unknown["spec"]["template"]["spec"]["containers"][0]["gpus"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(unknown)


def test_kubectl_kustomize_builds_the_same_objects(tmp_path: Path, kubectl: str) -> None:
    """`kubectl kustomize` (offline) reads the kustomization and every file it lists."""
    artifacts = render()
    write_bundle(artifacts, tmp_path)
    built = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    names = {(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(built.stdout)}
    assert names == {(o["kind"], o["metadata"]["name"]) for o in objects(artifacts)}


def test_pinned_version_is_one_the_validator_ships() -> None:
    # A typo in the pinned version would make every validation a SchemaNotFoundError.
    validate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert KUBERNETES_VERSION.count(".") == 2
