"""Alertmanager's webhook payload (version 4), parsed and turned into a command's environment.

Alertmanager POSTs one JSON document per notification: the group's status,
labels and annotations, and its alerts (each with its own status, labels,
annotations, times and fingerprint). Parsing is strict about the shape (a
payload that is not Alertmanager's is refused with a 400 saying why) and
every value that reaches an environment variable is bounded and free of NUL
bytes, because it came over the network.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from inferfleet.errors import FleetError

MAX_BODY = 1024 * 1024  # Alertmanager truncates a group long before this
MAX_VALUE = 16 * 1024  # per environment value
MAX_JSON = 100 * 1024  # Linux refuses one environment string over 128 KiB (E2BIG)
PREFIX = "INFERFLEET_ALERT_"
_LABEL_NAME = re.compile(r"[^A-Z0-9_]")


class PayloadError(FleetError, ValueError):
    """A webhook body is not an Alertmanager notification."""


@dataclass(frozen=True)
class Alert:
    status: str  # firing | resolved
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str = ""
    ends_at: str = ""
    generator_url: str = ""
    fingerprint: str = ""

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    def text(self) -> str:
        """One line a chat message or a mail subject can use as is."""
        where = self.labels.get("service", "")
        host = self.labels.get("host", "")
        if where and host:
            where = f"{where}@{host}"
        head = f"[{self.status.upper()}] {self.name}" + (f" {where}" if where else "")
        summary = self.annotations.get("summary", "")
        return f"{head}: {summary}" if summary else head

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "labels": self.labels,
            "annotations": self.annotations,
            "startsAt": self.starts_at,
            "endsAt": self.ends_at,
            "generatorURL": self.generator_url,
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True)
class Notification:
    receiver: str
    status: str
    group_key: str
    alerts: list[Alert] = field(default_factory=list)
    truncated: int = 0


def parse(body: bytes) -> Notification:
    """The notification in ``body``; :class:`PayloadError` when it is not one."""
    if len(body) > MAX_BODY:
        raise PayloadError(f"the body has {len(body)} bytes, more than {MAX_BODY}")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError(f"the body is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise PayloadError("the body is not a JSON object")
    version = doc.get("version")
    if version != "4":
        raise PayloadError(
            f"webhook version {version!r} is not 4",
            hint="point an Alertmanager webhook_config at this relay",
        )
    alerts = doc.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("the notification has no alerts list")
    parsed = [_alert(a, i) for i, a in enumerate(alerts)]
    truncated = doc.get("truncatedAlerts", 0)
    return Notification(
        receiver=_text(doc.get("receiver")),
        status=_text(doc.get("status")),
        group_key=_text(doc.get("groupKey")),
        alerts=parsed,
        truncated=truncated if isinstance(truncated, int) else 0,
    )


def _alert(data: Any, index: int) -> Alert:
    if not isinstance(data, dict):
        raise PayloadError(f"alert {index} is not an object")
    status = data.get("status")
    if status not in {"firing", "resolved"}:
        raise PayloadError(f"alert {index} has status {status!r}, not firing or resolved")
    return Alert(
        status=status,
        labels=_strings(data.get("labels"), f"alert {index} labels"),
        annotations=_strings(data.get("annotations", {}), f"alert {index} annotations"),
        starts_at=_text(data.get("startsAt")),
        ends_at=_text(data.get("endsAt")),
        generator_url=_text(data.get("generatorURL")),
        fingerprint=_text(data.get("fingerprint")),
    )


def _strings(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise PayloadError(f"{what} are not a map of strings")
    return dict(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _clean(value: str) -> str:
    return value.replace("\0", "")[:MAX_VALUE]


def environment(alert: Alert, notification: Notification) -> dict[str, str]:
    """The variables a command gets for one alert (added to the relay's own environment).

    Fields are passed as environment values, never spliced into the argv or a
    shell string, so an alert text cannot become an option or a command.
    """
    env = {
        "STATUS": alert.status,
        "NAME": alert.name,
        "SEVERITY": alert.labels.get("severity", ""),
        "SERVICE": alert.labels.get("service", ""),
        "HOST": alert.labels.get("host", ""),
        "INSTANCE": alert.labels.get("instance", ""),
        "SUMMARY": alert.annotations.get("summary", ""),
        "DESCRIPTION": alert.annotations.get("description", ""),
        "STARTS_AT": alert.starts_at,
        "ENDS_AT": alert.ends_at,
        "FINGERPRINT": alert.fingerprint,
        "GENERATOR_URL": alert.generator_url,
        "RECEIVER": notification.receiver,
        "GROUP_KEY": notification.group_key,
        "TEXT": alert.text(),
    }
    for key, value in alert.labels.items():
        env[f"LABEL_{_LABEL_NAME.sub('_', key.upper())}"] = value
    found = {PREFIX + key: _clean(value) for key, value in env.items()}
    whole = json.dumps(alert.to_json(), sort_keys=True)
    if len(whole) <= MAX_JSON:
        found[PREFIX + "JSON"] = whole
    else:
        found[PREFIX + "JSON_OMITTED"] = f"the alert's JSON has {len(whole)} characters"
    return found
