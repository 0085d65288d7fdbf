"""Every manifest of the fleet for a cluster, as render artifacts, with a kustomization.

Layout of ``render --target kubernetes --out DIR``::

    kustomization.yaml          lists every file below; overlay it (kustomize, kubectl -k)
    namespace.yaml
    models.yaml                 the init containers' fleet file and manifests (ConfigMap)
    services/<service>.yaml     StatefulSet, Service, ConfigMaps of an llm service
    gateway.yaml                LiteLLM: ConfigMap, Deployment, Service (with gateway:)
    monitoring.yaml             ServiceMonitors and the PrometheusRule
    network-policies.yaml       the exposure policy (L-58)

Byte-stable: objects in a fixed order, keys sorted, no timestamps.
"""

from __future__ import annotations

from collections.abc import Mapping

from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.render.bundle import Artifact
from inferfleet.render.kube.gateway import gateway_objects
from inferfleet.render.kube.models import models_configmap
from inferfleet.render.kube.monitoring import monitoring_objects
from inferfleet.render.kube.network import network_policies
from inferfleet.render.kube.objects import HEADER, PART_OF, Obj, dump, to_yaml
from inferfleet.render.kube.workload import exported_models, exported_services, service_objects

KIND = "kubernetes"


def render_kubernetes(
    loaded: LoadedFleet,
    namespace: str | None = None,
    memory: Mapping[str, int] | None = None,
) -> list[Artifact]:
    """The fleet's manifests (``memory``: the pods' memory requests in bytes, by service)."""
    fleet = loaded.fleet
    target = fleet.kubernetes
    if target is None:
        raise UsageError(
            f"{loaded.path} has no kubernetes: section",
            where=str(loaded.path),
            hint="declare kubernetes: with at least tools_image (the image that runs "
            "`inferfleet models fetch`), and an image per runtime built from source",
        )
    ns = namespace or target.namespace
    files: dict[str, list[Obj]] = {
        "namespace.yaml": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"app.kubernetes.io/part-of": PART_OF}},
            }
        ],
        "models.yaml": [models_configmap(fleet, loaded.root, exported_models(fleet), ns)],
    }
    for name in exported_services(fleet):
        files[f"services/{name}.yaml"] = service_objects(fleet, loaded.root, name, ns, memory or {})
    if fleet.gateway is not None:
        files["gateway.yaml"] = gateway_objects(fleet, ns)
    files["monitoring.yaml"] = monitoring_objects(fleet, ns)
    files["network-policies.yaml"] = network_policies(fleet, ns)
    found = [Artifact(path, dump(objects), KIND) for path, objects in files.items()]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": ns,
        "resources": sorted(files),
    }
    text = HEADER + to_yaml(kustomization)
    found.append(Artifact("kustomization.yaml", text, "kustomization"))
    return sorted(found, key=lambda a: a.path)
