"""A real Prometheus (Debian's ``prometheus``) on loopback, fed the configuration ``render`` writes.

The rendered files are production settings: 15 s scrapes and alerts that
wait minutes (``for: 2m``). Tests run a copy with 1 s intervals and a short
``for`` so that an alert fires within seconds; :func:`quick_copy` makes that
copy and changes nothing else (targets, labels, expressions stay as
rendered). Prometheus is started with its own storage folder and stopped by
its pid.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from helpers import require
from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.io import process
from inferfleet.render.bundle import fleet_artifacts

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
QUICK = "1s"


def rendered(loaded: LoadedFleet) -> tuple[str, str]:
    """prometheus.yml and the rules file exactly as ``inferfleet render`` writes them."""
    found = {a.path: a.content for a in fleet_artifacts(loaded)}
    return found["monitoring/prometheus.yml"], found["monitoring/rules/inferfleet.rules.yml"]


def quick_copy(
    config: str, rules: str, *, alert_for: str = "2s", extra: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rendered config with 1 s scrape/evaluation and ``for: alert_for`` on every alert."""
    doc = yaml.safe_load(config)
    doc["global"]["scrape_interval"] = QUICK
    doc["global"]["evaluation_interval"] = QUICK
    doc["global"]["scrape_timeout"] = QUICK
    for job in doc["scrape_configs"]:
        job["scrape_interval"] = QUICK
        job["scrape_timeout"] = QUICK
    doc.update(extra or {})
    rule_doc = yaml.safe_load(rules)
    for group in rule_doc["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["for"] = alert_for
    return doc, rule_doc


@contextlib.contextmanager
def running(
    folder: Path, config: dict[str, Any], rules: dict[str, Any], port: int
) -> Iterator[str]:
    """Prometheus on 127.0.0.1:``port`` with ``config`` (rules under rules/); yields its URL."""
    require(PROMETHEUS, "prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rules").mkdir(exist_ok=True)
    config_path = folder / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    (folder / "rules" / "inferfleet.rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    checked = process.run([PROMTOOL, "check", "config", str(config_path)], check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    argv = [
        PROMETHEUS,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    log = folder / "prometheus.log"
    proc = process.spawn_detached(argv, log_path=log, cwd=folder)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate(proc, grace=10.0)


def api(base: str, path: str, **params: str) -> Any:
    """``data`` of a Prometheus API answer; None while the server is not answering yet."""
    try:
        answer = httpx.get(f"{base}{path}", params=params, timeout=5.0)
    except httpx.TransportError:
        return None
    if answer.status_code != 200:
        return None
    doc = answer.json()
    assert doc["status"] == "success", doc
    return doc["data"]


def query(base: str, expr: str) -> list[dict[str, Any]]:
    data = api(base, "/api/v1/query", query=expr)
    return [] if data is None else list(data["result"])


def alerts(base: str, name: str, state: str) -> list[dict[str, Any]]:
    data = api(base, "/api/v1/alerts")
    if data is None:
        return []
    return [a for a in data["alerts"] if a["labels"]["alertname"] == name and a["state"] == state]
