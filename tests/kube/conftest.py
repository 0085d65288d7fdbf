"""Fixtures of the Kubernetes export tests: kubectl (Debian ``kubernetes-client``), when there.

No cluster runs here: objects are validated offline against the official
JSON schemas (``kubernetes-validate``), and ``kubectl kustomize`` builds the
kustomization. ``kubectl create --dry-run=client`` needs an API server's
discovery document even in client mode, so it cannot run without a cluster.
"""

from __future__ import annotations

import pytest
from helpers import require


@pytest.fixture(scope="session")
def kubectl() -> str:
    return require("kubectl", "kubernetes-client")
