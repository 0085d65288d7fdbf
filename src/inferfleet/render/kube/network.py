"""Network policies that mirror the exposure policy (L-58), decided once in render.exposure.

A host's listener is reachable by what its bind allows; in a cluster every
pod has an address, so reachability is stated as ingress rules instead. One
policy denies ingress to every inferfleet pod; each exported listener then
gets the peers its exposure level means:

- ``loopback`` (only its host reaches it: there, the gateway and the proxy):
  the gateway's and the proxy's pods of the same namespace
  (``inferfleet.dev/role: gateway|proxy``);
- ``lan`` (the networks of its bind address, reason stated): every pod of the
  cluster and the private address ranges (RFC 1918, RFC 4193), where LAN
  clients come from through a NodePort or LoadBalancer you overlay; never the
  internet;
- ``public`` (beyond the LAN, only behind the auth proxy): the proxy's pods,
  and the gateway's where the gateway fronts it (the gateway is behind the
  proxy).

Metrics are served on each service's own port (they follow its exposure on
the hosts, where Prometheus scrapes from the same host or the LAN): the
Prometheus pods named by ``kubernetes.monitoring_pods`` in the namespaces
``kubernetes.monitoring_namespace`` names may reach that port. Both selectors
in one peer (an AND): any pod may label itself ``prometheus``, but only the
cluster's admins label namespaces.
Egress is not restricted: the init containers fetch from the Hub.
"""

from __future__ import annotations

from inferfleet.fleetfile.fleet import Exposure, Fleet
from inferfleet.render.exposure import gateway_services, listen_address
from inferfleet.render.kube.gateway import NAME as GATEWAY
from inferfleet.render.kube.objects import (
    PART_OF,
    ROLE_LABEL,
    Obj,
    metadata,
    object_name,
    selector,
)
from inferfleet.render.kube.workload import exported_services

PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")


def _role(role: str) -> Obj:
    return {"podSelector": {"matchLabels": {ROLE_LABEL: role}}}


def peers(exposure: Exposure, *, gateway_fronts: bool) -> list[Obj]:
    """The ingress peers an exposure level means in a cluster (module docstring)."""
    if exposure.level == "lan":
        return [{"namespaceSelector": {}}] + [{"ipBlock": {"cidr": c}} for c in PRIVATE_RANGES]
    found = [_role("proxy")]
    if exposure.level == "loopback" or gateway_fronts:
        found.insert(0, _role("gateway"))
    return found


def _policy(
    name: str, namespace: str, service: str, sources: list[Obj], metrics: Obj | None
) -> Obj:
    rules: list[Obj] = [{"from": sources, "ports": [{"port": "http", "protocol": "TCP"}]}]
    if metrics is not None:
        rules.append({"from": [metrics], "ports": [{"port": "http", "protocol": "TCP"}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(name, namespace, {"app.kubernetes.io/part-of": PART_OF}),
        "spec": {
            "podSelector": {"matchLabels": selector(service)},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }


def network_policies(fleet: Fleet, namespace: str) -> list[Obj]:
    target = fleet.kubernetes
    assert target is not None
    monitoring: Obj = {
        "namespaceSelector": {"matchLabels": dict(sorted(target.monitoring_namespace.items()))},
        "podSelector": {"matchLabels": dict(sorted(target.monitoring_pods.items()))},
    }
    fronted = set(gateway_services(fleet))
    found: list[Obj] = [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": metadata("inferfleet-default-deny", namespace),
            "spec": {
                "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}},
                "policyTypes": ["Ingress"],
            },
        }
    ]
    for name in exported_services(fleet):
        service = fleet.services[name]
        listen_address(fleet, name)  # the one decision: refuses what the policy refuses
        sources = peers(service.exposure, gateway_fronts=name in fronted)
        metrics = monitoring if service.metrics_on else None
        found.append(_policy(object_name(name), namespace, name, sources, metrics))
    if fleet.gateway is not None:
        sources = peers(fleet.gateway.exposure, gateway_fronts=False)
        sources = [p for p in sources if p != _role("gateway")]
        found.append(_policy(object_name(GATEWAY), namespace, GATEWAY, sources, None))
    return found
