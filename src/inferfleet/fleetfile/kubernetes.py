"""The ``kubernetes:`` section: what exporting the fleet to a cluster needs beyond the fleet.

``inferfleet render --target kubernetes`` turns each llm service into a
StatefulSet whose argv is the launch pipeline's own; what a cluster needs
that the SSH hosts do not is stated here: the namespace, the storage class
and sizes of the model volumes, an image for every runtime the fleet builds
from source (llama.cpp: the user's image built from the pinned source), the
image that runs ``inferfleet models fetch`` / ``verify`` in the init
containers, and the LiteLLM image of the gateway. Images are judged by the
``kube-*`` check rules (pinned by digest, L-42), which run whenever this
section is declared.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from inferfleet.fleetfile.base import Name, Strict, Text, must_match
from inferfleet.fleetfile.quantities import ByteSize

# A label key (optional DNS prefix + name) and value, as Kubernetes accepts them.
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")

# RFC 1123 label (a namespace) and subdomain (object names: Secrets, StorageClasses).
_label = must_match(
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
    "a Kubernetes namespace name (lower-case letters, digits and '-', at most 63, starting "
    "and ending with a letter or digit)",
)
_subdomain = must_match(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
    "a Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253)",
)


def _image(value: str) -> str:
    if not value or value.startswith("-") or any(ch.isspace() for ch in value):
        raise ValueError(f"{value!r} is not an image reference such as repo/name@sha256:<digest>")
    return value


def _labels(value: dict[str, str]) -> dict[str, str]:
    for key, item in value.items():
        if not _LABEL_KEY.match(key) or len(key) > 316:
            raise ValueError(f"{key!r} is not a Kubernetes label key")
        if not _LABEL_VALUE.match(item):
            raise ValueError(f"{item!r} (label {key!r}) is not a Kubernetes label value")
    return value


Namespace = Annotated[Text, AfterValidator(_label)]
ObjectName = Annotated[Text, AfterValidator(_subdomain)]
Image = Annotated[Text, AfterValidator(_image)]
Labels = Annotated[dict[Text, Text], AfterValidator(_labels)]


def _some_labels(value: dict[str, str]) -> dict[str, str]:
    if not value:
        # An empty selector selects everything: every pod (or namespace) of the cluster.
        raise ValueError(
            "an empty label selector selects every pod or namespace of the cluster; "
            "name the labels of the Prometheus pods and of their namespace"
        )
    return value


Selector = Annotated[Labels, AfterValidator(_some_labels)]

DEFAULT_NAMESPACE = "inferfleet"
DEFAULT_CACHE_SIZE = 20 * 1024**3


class KubernetesTarget(Strict):
    """What ``render --target kubernetes`` needs beyond the fleet (and ``check`` judges)."""

    namespace: Namespace = DEFAULT_NAMESPACE
    """Namespace of every rendered object (--namespace overrides)."""
    storage_class: ObjectName | None = None
    """StorageClass of the model and cache volumes; default: the cluster's."""
    volume_size: ByteSize | None = None
    """Size of a model volume when volumes: names none for the model; it must hold the model's
    declared files (kube-model-volume)."""
    volumes: dict[Name, ByteSize] = Field(default_factory=dict)
    """Size of each model's volume, by model name."""
    cache_size: ByteSize = DEFAULT_CACHE_SIZE
    """Per-replica volume for compile and download caches (L-37), mounted at /cache as on the hosts.
    """
    images: dict[Name, Image] = Field(default_factory=dict)
    """Image per runtime without image: (llama.cpp: yours, built from the pinned source, with
    llama-server at /app/llama-server), pinned by digest (L-42)."""
    tools_image: Image
    """An image with this inferfleet installed: the init containers run `inferfleet models fetch`
    and `verify` in it (sizes and sha256, L-01), by digest."""
    gateway_image: Image | None = None
    """The LiteLLM proxy image of the gateway, pinned by digest."""
    hub_token_secret: ObjectName = "inferfleet-hub-token"
    """Secret whose key HF_TOKEN the fetch reads (a reference; optional for public repositories).
    The token never appears in a rendered file (L-06, L-55)."""
    monitoring_pods: Selector = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "prometheus"}
    )
    """Labels of the Prometheus pods that may scrape /metrics (the network policies let them in
    on the service port), in the namespaces monitoring_namespace selects: both must match, as a
    pod can label itself but not its namespace."""
    monitoring_namespace: Selector = Field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "monitoring"}
    )
    """Labels of the namespace(s) of the Prometheus pods (Kubernetes sets
    kubernetes.io/metadata.name on every namespace)."""
