"""Alertmanager's webhook payload (version 4), parsed and turned into a command's environment.

Alertmanager POSTs one JSON document per notification: the group's status,
labels and annotations, and its alerts (each with its own status, labels,
annotations, times and fingerprint). Parsing is strict about the shape (a
payload that is not Alertmanager's is refused with a 400 saying why) and
bounded before it starts: the body's size and its nesting depth are checked
on the bytes, so a hostile document can never reach ``RecursionError`` in
the JSON decoder. Every value that reaches an environment variable came over
the network: it is valid UTF-8 (lone surrogates replaced), free of NUL bytes,
and the variables of one alert fit a fixed budget (Linux refuses a command
whose environment is too large, E2BIG).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from inferfleet.bounded import nesting_depth
from inferfleet.errors import FleetError

MAX_BODY = 1024 * 1024  # Alertmanager truncates a group long before this
MAX_DEPTH = 32  # Alertmanager's notification nests 4 levels deep
MAX_VALUE = 16 * 1024  # per environment value
MAX_JSON = 100 * 1024  # Linux refuses one environment string over 128 KiB (E2BIG)
MAX_LABELS = 64  # labels that become INFERFLEET_ALERT_LABEL_* variables
MAX_ENV = 256 * 1024  # all of one alert's variables together (the limit is ~2 MiB with argv)
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
    if nesting_depth(body, MAX_DEPTH) > MAX_DEPTH:
        raise PayloadError(
            f"the body nests arrays or objects more than {MAX_DEPTH} levels deep",
            hint="an Alertmanager notification nests 4 levels; this is not one",
        )
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise PayloadError(f"the body is not JSON ({type(exc).__name__}: {exc})") from None
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
    return {_valid(k): _valid(v) for k, v in value.items()}


def _text(value: Any) -> str:
    return _valid(value) if isinstance(value, str) else ""


def _valid(value: str) -> str:
    """``value`` as text that encodes to UTF-8: JSON's lone surrogates (``"\\ud800"``) replaced.

    Such a string cannot be put in an environment or a JSON answer; left in,
    it would break the delivery and every later read of ``/deliveries``.
    """
    return value.encode("utf-8", "replace").decode("utf-8")


def _clean(value: str) -> str:
    return value.replace("\0", "")[:MAX_VALUE]


def environment(alert: Alert, notification: Notification) -> dict[str, str]:
    """The variables a command gets for one alert (added to the relay's own environment).

    Fields are passed as environment values, never spliced into the argv or a
    shell string, so an alert text cannot become an option or a command. At
    most MAX_LABELS labels become variables and all of them together stay
    within MAX_ENV bytes: what does not fit is named in
    ``INFERFLEET_ALERT_OMITTED`` instead (the fixed fields come first).
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
    labels = list(alert.labels.items())
    for key, value in labels[:MAX_LABELS]:
        env[f"LABEL_{_LABEL_NAME.sub('_', key.upper())}"] = value
    omitted = [f"{len(labels) - MAX_LABELS} labels"] if len(labels) > MAX_LABELS else []
    whole = json.dumps(alert.to_json(), sort_keys=True)
    if len(whole) <= MAX_JSON:
        env["JSON"] = whole
    else:
        env["JSON_OMITTED"] = f"the alert's JSON has {len(whole)} characters"
    found: dict[str, str] = {}
    size = 0
    for key, value in env.items():
        # The JSON is ASCII (json.dumps escapes NUL and the rest), and bounded above.
        name, text = PREFIX + key, value if key == "JSON" else _clean(value)
        cost = len(name) + len(text.encode("utf-8")) + 2  # NAME=VALUE and its NUL
        if size + cost > MAX_ENV:
            omitted.append(key)
            continue
        found[name] = text
        size += cost
    if omitted:
        found[PREFIX + "OMITTED"] = ", ".join(omitted)[:MAX_VALUE]
    return found
