"""Shared by the Kubernetes export tests: render a fleet, read the objects back, validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from helpers import ROOT

from inferfleet.fleetfile.loader import load_fleet
from inferfleet.render.bundle import Artifact
from inferfleet.render.kube.bundle import render_kubernetes

HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"
GOLDEN = Path(__file__).parent / "golden"
# The Kubernetes version whose JSON schemas every object must pass (strict: no unknown keys).
KUBERNETES_VERSION = "1.34.0"
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


def render(fleet: Path = HOMELAB, **options: Any) -> list[Artifact]:
    return render_kubernetes(load_fleet(fleet), **options)


def objects(artifacts: list[Artifact]) -> list[dict[str, Any]]:
    """Every object of the rendered files, the kustomization excluded."""
    found: list[dict[str, Any]] = []
    for artifact in artifacts:
        if artifact.kind == "kubernetes":
            found += [d for d in yaml.safe_load_all(artifact.content) if d is not None]
    return found


def find(artifacts: list[Artifact], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects(artifacts) if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def validate(obj: dict[str, Any]) -> None:
    """Raise kubernetes_validate.ValidationError for an object the schemas refuse."""
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
