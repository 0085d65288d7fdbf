"""What a host reports while it applies and when asked: service states and progress events.

Plain data, cheap to import: the deploying side parses these without
loading the machinery that produced them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

# One progress event of an apply: {"event": "step" | "health" | "done" | ..., ...}.
Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ServiceState:
    service: str
    pid: int | None = None  # its own process: the recorded pid, or the unit's MainPID
    process_spec: str | None = None  # spec of the recorded process, while it runs
    units: dict[str, str] = field(default_factory=dict)  # "scope:unit" -> "active/sub"
    files: dict[str, str] = field(default_factory=dict)  # installed path -> sha256
    healthy: bool = False  # answered 200 from its own process when the facts were read

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceState:
        return cls(**data)

    def unit_running(self, scope: str, unit: str) -> bool:
        return self.units.get(f"{scope}:{unit}", "").startswith("active/running")
