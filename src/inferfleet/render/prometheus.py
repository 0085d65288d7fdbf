"""Prometheus scrape config, recording rules and alert rules for the fleet.

L-56: a server started without its metrics flag answers ``/metrics`` with 501
and silently drops out of monitoring. So every endpoint with metrics on gets
a scrape job (and only those), every llm service gets a capacity series
(``inferfleet:slots``) from the fleet file, and ``InferfleetNoSamples`` fires
for any service in the fleet whose runtime series are missing.

Runtimes name their series differently; recording rules map each runtime's
names (from its adapter) onto ``inferfleet:*`` so alerts and the dashboard
are written once.

Targets are the addresses the fleet's Prometheus reaches (``monitoring.prometheus``:
its host, and whether it runs in a bridged container, L-57).
"""

from __future__ import annotations

from typing import Any

import yaml

from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render.endpoints import dial_address, endpoint, llm_services
from inferfleet.render.service_keys import keyed, scrape_key_file
from inferfleet.runtimes.registry import traits

JOB_PREFIX = "inferfleet-"
JOB_MATCH = f'job=~"{JOB_PREFIX}.+"'
RULES_FILE = "inferfleet.rules.yml"
SCRAPE_INTERVAL = "15s"
BY = "service, host, runtime"


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


def scrape_target(fleet: Fleet, name: str) -> str:
    """``host:port`` at which the fleet's Prometheus reaches service ``name``.

    Where it runs is ``monitoring.prometheus``: on the service's own host in a
    bridged container, the host gateway name, never the host's LAN address nor
    loopback (L-57); without it, as another host of the fleet reaches the service.
    """
    service = fleet.services[name]
    site = fleet.monitoring.prometheus if fleet.monitoring is not None else None
    return dial_address(
        fleet,
        service.host,
        service.bind,
        service.port,
        from_host=None if site is None else site.host,
        bridged=site is not None and site.network == "container",
    )


def scrape_jobs(fleet: Fleet) -> list[dict[str, Any]]:
    jobs = []
    for name, service in fleet.services.items():
        if not service.metrics_on:
            continue
        ep = endpoint(fleet, name)
        labels = {"service": name, "host": ep.host, "runtime": ep.runtime or "container"}
        if service.kind == "llm":
            labels["model"] = ep.alias
        job: dict[str, Any] = {
            "job_name": f"{JOB_PREFIX}{name}",
            "metrics_path": "/metrics",
            "scrape_interval": SCRAPE_INTERVAL,
        }
        if service.group is not None:
            # A router answers /metrics per member, and would LOAD an unloaded member
            # for a scrape unless told not to (checked on b11434): its scrape fails
            # while it is unloaded, by design.
            labels["group"] = service.group
            job["params"] = {"model": [ep.alias], "autoload": ["false"]}
        if keyed(fleet, name):
            # Its /metrics requires its key (L-58): read from a file next to this config
            # (untracked, mode 600), never written here.
            job["authorization"] = {"type": "Bearer", "credentials_file": scrape_key_file(name)}
        job["static_configs"] = [{"targets": [scrape_target(fleet, name)], "labels": labels}]
        jobs.append(job)
    return jobs


def scrape_config(fleet: Fleet, rules_dir: str = "rules") -> str:
    doc = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [f"{rules_dir}/{RULES_FILE}"],
        "scrape_configs": scrape_jobs(fleet),
    }
    return "# Rendered by inferfleet from the fleet file.\n" + dump(doc)


def recording_rules(fleet: Fleet) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for name in llm_services(fleet):
        service = fleet.services[name]
        rules.append(
            {
                "record": "inferfleet:slots",
                "expr": f"vector({service.parallel})",
                "labels": {"service": name, "host": service.host}
                | ({} if service.group is None else {"group": service.group}),
            }
        )
    kinds = sorted(
        {
            fleet.runtimes[svc.runtime].kind
            for svc in fleet.services.values()
            if svc.kind == "llm" and svc.runtime is not None
        }
    )
    for kind in kinds:
        names = traits(kind).metrics
        rules += [
            {"record": "inferfleet:requests_running", "expr": f"sum by ({BY}) ({names.running})"},
            {"record": "inferfleet:requests_waiting", "expr": f"sum by ({BY}) ({names.waiting})"},
            {
                "record": "inferfleet:generation_tokens:rate5m",
                "expr": f"sum by ({BY}) (rate({names.generation_tokens}[5m]))",
            },
            {
                "record": "inferfleet:prompt_tokens:rate5m",
                "expr": f"sum by ({BY}) (rate({names.prompt_tokens}[5m]))",
            },
        ]
    return rules


def alert_rules(fleet: Fleet | None = None) -> list[dict[str, Any]]:
    """The alerts; with swap groups, members (whose scrape fails while they are
    unloaded) are left out of the down and no-samples alerts."""
    grouped = fleet is not None and bool(fleet.groups)
    up = f'up{{{JOB_MATCH}, group=""}}' if grouped else f"up{{{JOB_MATCH}}}"
    slots = 'inferfleet:slots{group=""}' if grouped else "inferfleet:slots"
    return [
        {
            "alert": "InferfleetEndpointDown",
            "expr": f"{up} == 0",
            "for": "2m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.service }} on {{ $labels.host }} is not answering /metrics",
                "description": "The scrape of {{ $labels.instance }} fails: the server is down, "
                "or started without its metrics flag (501, L-56).",
            },
        },
        {
            "alert": "InferfleetRequestsDeferred",
            "expr": "inferfleet:requests_waiting > 0",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.service }} queues requests: every slot is busy",
                "description": "{{ $value }} requests waiting for 5 minutes; add slots or "
                "another endpoint (the per-slot window is the client contract, L-25).",
            },
        },
        {
            "alert": "InferfleetSlotsSaturated",
            "expr": "inferfleet:requests_running >= on(service) group_left() inferfleet:slots",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.service }} has had all its slots busy for 10 minutes",
                "description": "Requests beyond the slot count are deferred.",
            },
        },
        {
            "alert": "InferfleetNoSamples",
            "expr": f"{slots} unless on(service) inferfleet:requests_running",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "no runtime samples from {{ $labels.service }}",
                "description": "The fleet has this service but Prometheus gets none of its "
                "series: no scrape job, or metrics are off (L-56).",
            },
        },
    ]


def rule_groups(fleet: Fleet) -> list[dict[str, Any]]:
    """The recording and alert rule groups (a rules file's, or a PrometheusRule's spec)."""
    return [
        {"name": "inferfleet-recording", "rules": recording_rules(fleet)},
        {"name": "inferfleet-alerts", "rules": alert_rules(fleet)},
    ]


def rules_file(fleet: Fleet) -> str:
    doc = {"groups": rule_groups(fleet)}
    return "# Rendered by inferfleet from the fleet file.\n" + dump(doc)
