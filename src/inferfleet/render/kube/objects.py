"""Kubernetes objects as plain data: names, labels, metadata, and their byte-stable YAML."""

from __future__ import annotations

import math
from typing import Any

import yaml

Obj = dict[str, Any]

PART_OF = "inferfleet"
SERVICE_LABEL = "inferfleet.dev/service"
# The role of a pod in the exposure policy (L-58): llm, gateway, proxy.
ROLE_LABEL = "inferfleet.dev/role"
HEADER = "# Rendered by inferfleet from the fleet file; overlay it with kustomize, do not edit.\n"


def object_name(service: str) -> str:
    """Every object of a service is named like its systemd unit: ``inferfleet-<service>``."""
    return f"inferfleet-{service}"


def selector(service: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": object_name(service), SERVICE_LABEL: service}


def labels(service: str, role: str) -> dict[str, str]:
    return {
        **selector(service),
        "app.kubernetes.io/name": object_name(service),
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": PART_OF,
        ROLE_LABEL: role,
    }


def metadata(name: str, namespace: str, object_labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if object_labels:
        meta["labels"] = dict(object_labels)
    return meta


def quantity(size: int) -> str:
    """Bytes as a Kubernetes quantity: whole MiB (``Mi``) rounded up, or GiB when exact."""
    mib = math.ceil(size / (1 << 20))
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


class _Dumper(yaml.SafeDumper):
    """Multi-line text (templates, configs, manifests) as literal blocks a reviewer can read;
    no anchors and aliases: every object reads on its own."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def to_yaml(data: Any) -> str:
    """One YAML document, keys sorted: same data, same bytes."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=1 << 16)


def dump(objects: list[Obj]) -> str:
    """One document per object, in the order given, under the rendered-by header."""
    return HEADER + "---\n".join(to_yaml(o) for o in objects)
