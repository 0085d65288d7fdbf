"""Alertmanager configuration that delivers the fleet's alerts to ``inferfleet relay``.

The rendered ``alertmanager.yml`` routes every alert to one webhook receiver
(the relay), grouped per alert, service and host, with resolved notices on,
and lets a critical alert of a service (the endpoint is down) silence its
warnings (no samples, saturated) while it lasts. ``prometheus_alerting``
is the block Prometheus needs to send its alerts to that Alertmanager.
Both are pure functions: same input, same bytes.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import yaml

from inferfleet.errors import UsageError
from inferfleet.io import token_scope

RECEIVER = "inferfleet-relay"
GROUP_BY = ["alertname", "service", "host"]
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def _duration(name: str, value: str) -> str:
    if not _DURATION.match(value):
        raise UsageError(
            f"{name} {value!r} is not an Alertmanager duration",
            hint="write it like 30s, 5m or 4h",
        )
    return value


def _url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise UsageError(
            f"webhook URL {value!r} is not an http(s) URL",
            hint="give the relay's address, e.g. http://127.0.0.1:9099/alerts",
        )
    return value


def config(
    webhook_url: str,
    *,
    credentials_file: str | None = None,
    group_wait: str = "30s",
    group_interval: str = "5m",
    repeat_interval: str = "4h",
) -> dict[str, Any]:
    """The configuration as data. ``credentials_file`` holds the relay's bearer token."""
    webhook: dict[str, Any] = {
        "url": _url(webhook_url),
        "send_resolved": True,
        "max_alerts": 0,
    }
    if credentials_file is not None:
        if not token_scope.encrypted_or_local(token_scope.origin(webhook_url)):
            # One rule for every credential (io/token_scope.py): https, or loopback.
            raise UsageError(
                f"the relay's token would cross the network in clear: the webhook URL "
                f"{webhook_url} is plain http beyond loopback",
                where="--url",
                hint="run the relay on the Alertmanager's host (http://127.0.0.1:...), or "
                "put TLS in front of it and give its https:// URL",
            )
        # The token stays in a file (L-06: never on a command line or in the repo, L-55).
        webhook["http_config"] = {
            "authorization": {"type": "Bearer", "credentials_file": credentials_file}
        }
    return {
        "route": {
            "receiver": RECEIVER,
            "group_by": list(GROUP_BY),
            "group_wait": _duration("group_wait", group_wait),
            "group_interval": _duration("group_interval", group_interval),
            "repeat_interval": _duration("repeat_interval", repeat_interval),
        },
        "receivers": [{"name": RECEIVER, "webhook_configs": [webhook]}],
        "inhibit_rules": [
            {
                "source_matchers": ['severity="critical"'],
                "target_matchers": ['severity="warning"'],
                "equal": ["service", "host"],
            }
        ],
    }


def render(webhook_url: str, **options: Any) -> str:
    """``alertmanager.yml`` text."""
    body = yaml.safe_dump(config(webhook_url, **options), sort_keys=False, width=100)
    return "# Rendered by inferfleet: every alert goes to inferfleet relay.\n" + body


def prometheus_alerting(targets: list[str]) -> dict[str, Any]:
    """The ``alerting:`` block of prometheus.yml that sends alerts to these Alertmanagers."""
    if not targets:
        raise UsageError(
            "no Alertmanager address given", hint="pass host:port of each Alertmanager"
        )
    return {"alertmanagers": [{"static_configs": [{"targets": list(targets)}]}]}
