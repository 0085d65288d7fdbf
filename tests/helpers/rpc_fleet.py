"""A fleet with one llama.cpp service on h1 split over an RPC worker on h2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from inferfleet.cli.fleet_cmds import embedded_example

SERVICE = "split"
WORKER_PORT = 50052


def rpc_data(
    *,
    h1: str = "10.250.7.1",
    h2: str = "10.250.7.2",
    host_memory: str = "1GiB",
    worker_memory: str = "1GiB",
    port: int = 8080,
    **worker: Any,
) -> dict[str, Any]:
    """The embedded example's runtime and model; ``split`` on h1 with a worker on h2's cpu0."""
    data: dict[str, Any] = yaml.safe_load(embedded_example().read_text())
    base = data["services"].pop("gemma")
    data["hosts"] = {
        "h1": {
            "address": h1,
            "devices": [{"name": "cpu0", "vendor": "cpu", "memory": host_memory}],
        },
        "h2": {
            "address": h2,
            "devices": [{"name": "cpu0", "vendor": "cpu", "memory": worker_memory}],
        },
    }
    data["services"] = {
        SERVICE: {
            **base,
            "host": "h1",
            "bind": h1,
            "exposure": {"level": "lan", "reason": "the tests reach it from the root namespace"},
            "port": port,
            "ctx_per_slot": 2048,
            "parallel": 1,
            "rpc": [{"host": "h2", "device": "cpu0", "port": WORKER_PORT, **worker}],
        }
    }
    return data


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
