"""ServiceMonitors and the PrometheusRule pass the Prometheus Operator's API validation.

The operator's CRD JSON schemas are not packaged on PyPI, npm or Debian; the
npm package ``@kubernetes-models/prometheus-operator`` (pinned in
:data:`NPM_PACKAGE`) carries validators generated from the operator's API
types (``pkg/apis/monitoring/v1``: field types, enums such as relabel actions,
duration patterns). ``scripts/test`` installs it under
``~/.cache/inferfleet-tests/npm`` (``INFERFLEET_TEST_NPM`` overrides); without
it, or without node, these tests skip and say so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import CRD_KINDS, objects, render

NPM_PACKAGE = "@kubernetes-models/prometheus-operator@6.0.0"
NPM_DIR = Path(os.environ.get("INFERFLEET_TEST_NPM", "~/.cache/inferfleet-tests/npm")).expanduser()
SCRIPT = Path(__file__).with_name("crd_validate.mjs")


def _validate(tmp_path: Path, docs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    modules = NPM_DIR / "node_modules"
    if node is None or not (modules / "@kubernetes-models/prometheus-operator").is_dir():
        pytest.skip(
            f"node and {NPM_PACKAGE} under {NPM_DIR} are needed (scripts/test installs them)"
        )
    # ESM resolves packages next to the script: give it the installed node_modules.
    (tmp_path / "node_modules").symlink_to(modules)
    script = tmp_path / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    return subprocess.run(
        [node, str(script)], input=json.dumps(docs), capture_output=True, text=True, timeout=120
    )


def test_rendered_monitors_and_rules_pass_the_operator_validators(tmp_path: Path) -> None:
    docs = [o for o in objects(render()) if o["kind"] in CRD_KINDS]
    assert sorted({o["kind"] for o in docs}) == ["PrometheusRule", "ServiceMonitor"]
    done = _validate(tmp_path, docs)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_validators_refuse_a_broken_monitor_and_rule(tmp_path: Path) -> None:
    docs = [o for o in objects(render()) if o["kind"] in CRD_KINDS]
    monitor = next(o for o in docs if o["kind"] == "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["relabelings"][0]["action"] = "rename"
    rule = next(o for o in docs if o["kind"] == "PrometheusRule")
    rule["spec"]["groups"][1]["rules"][0]["for"] = "2 minutes"
    done = _validate(tmp_path, [monitor, rule])
    assert done.returncode == 1
    assert "relabelings/0/action" in done.stdout and "rules/0/for" in done.stdout
