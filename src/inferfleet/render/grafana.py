"""A Grafana dashboard (JSON model) for the fleet, on the ``inferfleet:*`` series.

Panels read the recording rules (not raw runtime series), so one dashboard
covers llama.cpp, vLLM and SGLang endpoints. A text panel carries the
fleet's contract per service (per-slot window x slots, L-25).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render.endpoints import endpoint, llm_services
from inferfleet.render.prometheus import JOB_MATCH

UID = "inferfleet-fleet"
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SERVICE_FILTER = 'service=~"$service"'


def _per_service(metric: str, *matchers: str, legend: str = "{{service}}") -> tuple[str, str]:
    """A PromQL selector for ``metric`` on the services picked in the dashboard, and its legend."""
    return f"{metric}{{{','.join((*matchers, SERVICE_FILTER))}}}", legend


class _Panel(NamedTuple):
    title: str
    grid: tuple[int, int, int, int]  # x, y, w, h
    series: tuple[tuple[str, str], ...]  # (expr, legend) of each target, refIds A, B, ...
    unit: str = "short"
    kind: str = "timeseries"


_PANELS = (
    _Panel("Endpoints up", (0, 0, 8, 6), (_per_service("up", JOB_MATCH),), kind="stat"),
    _Panel(
        "Generated tokens / s",
        (8, 0, 16, 6),
        (_per_service("inferfleet:generation_tokens:rate5m"),),
        "none",
    ),
    _Panel(
        "Busy slots vs slots",
        (0, 6, 12, 8),
        (
            _per_service("inferfleet:requests_running", legend="{{service}} busy"),
            _per_service("inferfleet:slots", legend="{{service}} slots"),
        ),
    ),
    _Panel(
        "Requests deferred (all slots busy)",
        (12, 6, 12, 8),
        (_per_service("inferfleet:requests_waiting"),),
    ),
    _Panel(
        "Prompt tokens / s",
        (0, 14, 12, 8),
        (_per_service("inferfleet:prompt_tokens:rate5m"),),
        "none",
    ),
)


def _panel(panel_id: int, spec: _Panel) -> dict[str, Any]:
    x, y, w, h = spec.grid
    targets = [
        {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
        for i, (expr, legend) in enumerate(spec.series)
    ]
    return {
        "id": panel_id,
        "type": spec.kind,
        "title": spec.title,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": spec.unit}, "overrides": []},
        "options": {},
        "targets": targets,
    }


def _contract_table(fleet: Fleet) -> str:
    lines = [
        "| service | host | runtime | model id | window per slot | slots | endpoint |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in llm_services(fleet):
        ep = endpoint(fleet, name)
        lines.append(
            f"| {name} | {ep.host} | {ep.runtime} | {ep.alias} | {ep.ctx_per_slot} | "
            f"{ep.parallel} | {ep.base_url} |"
        )
    return "\n".join(lines)


def dashboard(fleet: Fleet) -> dict[str, Any]:
    panels = [_panel(i, spec) for i, spec in enumerate(_PANELS, start=1)]
    contract = {
        "id": len(panels) + 1,
        "type": "text",
        "title": "Client contract (from the fleet file)",
        "gridPos": {"x": 12, "y": 14, "w": 12, "h": 8},
        "options": {"mode": "markdown", "content": _contract_table(fleet)},
    }
    panels.append(contract)
    return {
        "uid": UID,
        "title": "inferfleet fleet",
        "tags": ["inferfleet", "llm"],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "service",
                    "label": "Service",
                    "type": "query",
                    "datasource": DATASOURCE,
                    "query": {"query": "label_values(inferfleet:slots, service)", "refId": "S"},
                    "definition": "label_values(inferfleet:slots, service)",
                    "includeAll": True,
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                    "hide": 0,
                },
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def dashboard_json(fleet: Fleet) -> str:
    return json.dumps(dashboard(fleet), indent=2) + "\n"
