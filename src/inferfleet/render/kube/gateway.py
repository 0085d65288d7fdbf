"""The gateway (LiteLLM) in the cluster: its config as a ConfigMap, a Deployment, a Service.

The config is :func:`inferfleet.render.gateway.config`'s, the one the hosts'
gateway runs (per-slot windows and slots, L-25, L-26; timeouts; the master key
by ``os.environ/`` reference); only each ``api_base`` changes, to the service's
in-cluster address. The keys stay in a Secret the Deployment references (L-55).
"""

from __future__ import annotations

import hashlib
from typing import Any

from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render import gateway as hosts_gateway
from inferfleet.render.endpoints import endpoint
from inferfleet.render.kube.objects import Obj, labels, metadata, selector, to_yaml
from inferfleet.render.kube.workload import cluster_url

NAME = "gateway"
OBJECT = "inferfleet-gateway"
CONFIG_DIR = "/etc/litellm"
CONFIG_KEY = "config.yaml"


def gateway_config(fleet: Fleet, namespace: str) -> dict[str, Any]:
    """LiteLLM's config: the fleet's model list, each pointing at its Service."""
    assert fleet.gateway is not None
    urls = {}
    for name, service in fleet.services.items():
        if service.kind == "llm":
            urls[endpoint(fleet, name).alias] = cluster_url(name, service.port, namespace)
    config = hosts_gateway.config(fleet)
    for model in config["model_list"]:
        model["litellm_params"]["api_base"] = urls[model["model_name"]]
    return config


def gateway_objects(fleet: Fleet, namespace: str) -> list[Obj]:
    gateway = fleet.gateway
    target = fleet.kubernetes
    assert gateway is not None and target is not None
    if target.gateway_image is None:
        raise UsageError(
            "the fleet declares a gateway, but kubernetes.gateway_image names no LiteLLM image",
            where="kubernetes.gateway_image",
            hint="name the LiteLLM proxy image by digest (L-42)",
        )
    text = to_yaml(gateway_config(fleet, namespace))
    digest = hashlib.sha256(text.encode()).hexdigest()
    pod_labels = labels(NAME, "gateway")
    argv = ["litellm", "--config", f"{CONFIG_DIR}/{CONFIG_KEY}", "--host", "0.0.0.0"]
    argv += ["--port", str(gateway.port)]
    probe_path = "/health/liveliness"
    container: Obj = {
        "name": "litellm",
        "image": target.gateway_image,
        "command": argv,
        "ports": [{"name": "http", "containerPort": gateway.port, "protocol": "TCP"}],
        # The keys clients send: what the host's untracked keys_env holds (L-55).
        "envFrom": [{"secretRef": {"name": f"{OBJECT}-keys"}}],
        "readinessProbe": {"httpGet": {"path": "/health/readiness", "port": "http"}},
        "livenessProbe": {"httpGet": {"path": probe_path, "port": "http"}},
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(OBJECT, namespace, pod_labels),
            "data": {CONFIG_KEY: text},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata(OBJECT, namespace, pod_labels),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector(NAME)},
                "template": {
                    # A changed config rolls the pods: LiteLLM reads it once, at start.
                    "metadata": {
                        "labels": pod_labels,
                        "annotations": {"inferfleet.dev/config-sha256": digest},
                    },
                    "spec": {
                        "containers": [container],
                        "volumes": [{"name": "config", "configMap": {"name": OBJECT}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(OBJECT, namespace, pod_labels),
            "spec": {
                "selector": selector(NAME),
                "ports": [
                    {"name": "http", "port": gateway.port, "targetPort": "http", "protocol": "TCP"}
                ],
            },
        },
    ]
