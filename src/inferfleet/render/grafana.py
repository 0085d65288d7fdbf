"""A Grafana dashboard (JSON model) for the fleet, on the ``inferfleet:*`` series.

Panels read the recording rules (not raw runtime series), so one dashboard
covers llama.cpp, vLLM and SGLang endpoints. A text panel carries the
fleet's contract per service (per-slot window x slots, L-25).
"""

from __future__ import annotations

import json
from typing import Any

from inferfleet.fleetfile.fleet import Fleet
from inferfleet.render.endpoints import endpoint, llm_services
from inferfleet.render.prometheus import JOB_MATCH

UID = "inferfleet-fleet"
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SERVICE_FILTER = 'service=~"$service"'


def _target(expr: str, legend: str, ref: str = "A") -> dict[str, Any]:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(
    panel_id: int,
    title: str,
    kind: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    unit: str = "short",
) -> dict[str, Any]:
    x, y, w, h = grid
    return {
        "id": panel_id,
        "type": kind,
        "title": title,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
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
    f = SERVICE_FILTER
    panels = [
        _panel(
            1,
            "Endpoints up",
            "stat",
            (0, 0, 8, 6),
            [_target(f"up{{{JOB_MATCH},{f}}}", "{{service}}")],
        ),
        _panel(
            2,
            "Generated tokens / s",
            "timeseries",
            (8, 0, 16, 6),
            [_target(f"inferfleet:generation_tokens:rate5m{{{f}}}", "{{service}}")],
            "none",
        ),
        _panel(
            3,
            "Busy slots vs slots",
            "timeseries",
            (0, 6, 12, 8),
            [
                _target(f"inferfleet:requests_running{{{f}}}", "{{service}} busy", "A"),
                _target(f"inferfleet:slots{{{f}}}", "{{service}} slots", "B"),
            ],
        ),
        _panel(
            4,
            "Requests deferred (all slots busy)",
            "timeseries",
            (12, 6, 12, 8),
            [_target(f"inferfleet:requests_waiting{{{f}}}", "{{service}}")],
        ),
        _panel(
            5,
            "Prompt tokens / s",
            "timeseries",
            (0, 14, 12, 8),
            [_target(f"inferfleet:prompt_tokens:rate5m{{{f}}}", "{{service}}")],
            "none",
        ),
    ]
    contract = {
        "id": 6,
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
