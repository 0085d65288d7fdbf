"""A fleet with one swap group of two members: the test model under two aliases and windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from inferfleet.cli.fleet_cmds import embedded_example

GROUP = "swap"
SMALL, BIG = "small", "big"
SMALL_ALIAS, BIG_ALIAS = "gemma-small", "gemma-big"


def group_data(port: int, *, backend: str = "process", **group: Any) -> dict[str, Any]:
    """The embedded example's host, runtime and model; two members of group ``swap``:
    ``small`` (2048 per slot x 1) and ``big`` (4096 per slot x 2, q8_0 K cache)."""
    data: dict[str, Any] = yaml.safe_load(embedded_example().read_text())
    base = data["services"].pop("gemma")
    common = {
        **base,
        "port": port,
        "group": GROUP,
        "backend": backend,
        "unit": {"scope": "user"},
    }
    common.pop("alias")
    data["services"] = {
        SMALL: {**common, "alias": SMALL_ALIAS, "ctx_per_slot": 2048, "parallel": 1},
        BIG: {
            **common,
            "alias": BIG_ALIAS,
            "ctx_per_slot": 4096,
            "parallel": 2,
            "kv_cache": {"k": "q8_0", "v": "f16"},
        },
    }
    data["groups"] = {GROUP: {"max_loaded": 1, "default": SMALL, **group}}
    return data


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
