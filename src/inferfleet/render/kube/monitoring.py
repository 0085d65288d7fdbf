"""Prometheus Operator objects: a ServiceMonitor per service with metrics, one PrometheusRule.

The rules are :func:`inferfleet.render.prometheus.rule_groups`, the ones the
hosts' Prometheus loads; the ServiceMonitors give every series the labels
those rules group by (``service``, ``host``, ``runtime``, ``model``) and the
job name ``inferfleet-<service>`` the alerts match, so one set of rules and
one dashboard serve both targets. Only services with metrics on are scraped
(L-56).
"""

from __future__ import annotations

from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render import prometheus
from inferfleet.render.endpoints import endpoint
from inferfleet.render.kube.objects import PART_OF, Obj, labels, metadata, object_name, selector
from inferfleet.render.kube.workload import exported_services


def _relabel(label: str, value: str) -> Obj:
    return {"action": "replace", "targetLabel": label, "replacement": value}


def service_monitor(fleet: Fleet, name: str, namespace: str) -> Obj:
    ep = endpoint(fleet, name)
    # The operator names the job after the Service (inferfleet-<name>), as the hosts' job.
    relabel = [
        _relabel("service", name),
        _relabel("host", ep.host),
        _relabel("runtime", ep.runtime or "container"),
        _relabel("model", ep.alias),
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata(object_name(name), namespace, labels(name, "llm")),
        "spec": {
            "selector": {"matchLabels": selector(name)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": "http",
                    "path": "/metrics",
                    "interval": prometheus.SCRAPE_INTERVAL,
                    "relabelings": relabel,
                }
            ],
        },
    }


def monitoring_objects(fleet: Fleet, namespace: str) -> list[Obj]:
    found = [
        service_monitor(fleet, name, namespace)
        for name in exported_services(fleet)
        if fleet.services[name].metrics_on
    ]
    found.append(
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": metadata("inferfleet", namespace, {"app.kubernetes.io/part-of": PART_OF}),
            "spec": {"groups": prometheus.rule_groups(fleet)},
        }
    )
    return found
