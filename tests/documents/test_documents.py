"""Every versioned ``--json`` document validates against its type's JSON Schema.

Each command runs for real (the in-process entry point) on real inputs: the
example fleets, the fixtures, GGUF files built in the test, a git repository
made in tmp. Its stdout is validated with ``jsonschema`` against the schema
``inferfleet.documents.json_schema`` derives from the document's type; the
schemas refuse keys the type does not name, so a document and its type
cannot drift apart unnoticed.

Documents that need a running llama-server, a Hub or remote hosts (``up``,
``bench``, ``plan``, ``deploy``, ``models manifest`` / ``fetch``) are not
produced here; their types are checked to give a valid schema at least.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from fixtures.gguf_builder import gemma3_like
from helpers import FIXTURES, ROOT, free_port
from helpers.cli import CliResult
from helpers.git import git
from helpers.real_model import llama_server

from inferfleet import documents
from inferfleet.fleetfile.loader import load_fleet

Cli = Callable[..., CliResult]
HOMELAB = ROOT / "examples" / "homelab" / "fleet.yaml"
LOCAL = ROOT / "examples" / "local" / "fleet.yaml"
BROKEN = FIXTURES / "fleets" / "broken.yaml"  # valid schema, fails check rules
RUNTIMES = FIXTURES / "fleets" / "runtimes.yaml"

# Every schema id this module produces a real document for; the last test checks
# the rest are exactly the documents that need a server, a Hub or remote hosts.
PRODUCED: set[str] = set()
NOT_PRODUCED_HERE = {
    "inferfleet.up/v1",  # a real llama-server (tests/e2e)
    "inferfleet.bench/v1",  # a real llama-server (validated in tests/bench/test_bench_real.py)
    "inferfleet.tune/v1",  # real llama-servers (validated in tests/tune/test_tune_real.py)
    "inferfleet.plan/v1",  # hosts reached over ssh (tests/deploy)
    "inferfleet.deploy-plan/v1",
    "inferfleet.deploy/v1",
    "inferfleet.models.manifest/v1",  # the test Hub (tests/hub)
    "inferfleet.models.fetch/v1",
    "inferfleet.runtime-venv/v1",  # a venv + pip install (tests/install/test_vllm_venv.py)
    "inferfleet.bootstrap/v1",  # a test host over ssh (tests/bootstrap)
}


def valid(result: CliResult, schema: str, *, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """The run's document, validated against the schema of ``schema``."""
    assert result.code in codes, f"exit {result.code}\n{result.stderr}"
    doc = result.document()
    assert doc["schema"] == schema
    jsonschema.validate(doc, documents.json_schema(schema))
    PRODUCED.add(schema)
    return doc


def test_validate_a_valid_and_an_invalid_file(cli: Cli, tmp_path: Path) -> None:
    doc = valid(cli("validate", str(HOMELAB), "--json"), "inferfleet.validate/v1")
    assert doc["valid"] is True and doc["counts"]["services"] > 0
    invalid = tmp_path / "fleet.yaml"
    invalid.write_text("version: 1\nhosts:\n  box:\n    adress: 10.0.0.2\n")
    bad = valid(cli("validate", str(invalid), "--json"), "inferfleet.validate/v1", codes=(2,))
    assert bad["valid"] is False and bad["errors"][0]["line"] == 4 and "counts" not in bad


def test_show_the_fleet_and_one_service_with_its_argv(cli: Cli) -> None:
    fleet = valid(cli("show", "--file", str(HOMELAB), "--json"), "inferfleet.show/v1")
    assert "services" in fleet["fleet"]
    one = valid(cli("show", "gemma", "--file", str(LOCAL), "--json"), "inferfleet.show/v1")
    assert one["service"] == "gemma" and "--port" in one["argv"]


def test_check_report_and_rule_catalogue(cli: Cli) -> None:
    for fleet in (HOMELAB, RUNTIMES, BROKEN):
        valid(cli("check", str(fleet), "--json"), "inferfleet.check/v1", codes=(0, 1))
    rules = valid(cli("check", "--list", "--json"), "inferfleet.check.rules/v1")
    assert len(rules["rules"]) > 10


def test_explain_a_lesson_and_a_rule(cli: Cli) -> None:
    assert valid(cli("explain", "L-25", "--json"), "inferfleet.explain/v1")["rule"] is None
    one = valid(cli("explain", "metrics-off", "--json"), "inferfleet.explain/v1")
    assert one["rule"]["lesson"] == one["lesson"]["id"] == "L-56"


def test_render_and_diff(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    doc = valid(
        cli("render", "--file", str(HOMELAB), "--out", str(out), "--json"),
        "inferfleet.render/v1",
    )
    assert doc["files"]
    unchanged = valid(
        cli("diff", "--file", str(HOMELAB), "--out", str(out), "--json"), "inferfleet.diff/v1"
    )
    assert unchanged["changes"] == []
    (out / doc["files"][0]["path"]).write_text("edited by hand\n")
    changed = valid(
        cli("diff", "--file", str(HOMELAB), "--out", str(out), "--json"),
        "inferfleet.diff/v1",
        codes=(1,),
    )
    assert changed["changes"][0]["status"] == "changed"


def test_secrets_scan_of_a_git_repository(cli: Cli, tmp_path: Path) -> None:
    repo = tmp_path / "fleet"
    repo.mkdir()
    git(repo, "init", "-q")
    shutil.copy(HOMELAB, repo / "fleet.yaml")
    (repo / "secrets.env").write_text("HF_TOKEN=not-a-real-token-but-long\n")
    (repo / "notes.md").write_text("the token is not-a-real-token-but-long\n")
    git(repo, "add", "fleet.yaml", "notes.md")
    doc = valid(
        cli("secrets", "scan", "--repo", str(repo), "-e", str(repo / "secrets.env"), "--json"),
        "inferfleet.secrets-scan/v1",
        codes=(1,),
    )
    assert [f["path"] for f in doc["findings"]] == ["notes.md"]


def test_runtimes_list_and_the_cached_install(cli: Cli) -> None:
    listed = valid(cli("runtime", "list", "--file", str(LOCAL), "--json"), "inferfleet.runtimes/v1")
    assert listed["runtimes"][0]["kind"] == "llama.cpp"
    source = load_fleet(LOCAL).fleet.runtimes["llama-cpp"].source
    assert source is not None
    llama_server()  # built once per machine (tests/helpers/real_model.py)
    doc = valid(
        cli("runtime", "install", "llama.cpp", "--file", str(LOCAL), "--json"),
        "inferfleet.runtime/v1",
    )
    assert doc["built"] is False


def test_gguf_inspect_with_tensors_and_kv_sizing(cli: Cli, tmp_path: Path) -> None:
    path = gemma3_like().write(tmp_path / "tiny.gguf")
    args = ["gguf", "inspect", str(path), "--tensors", "--ctx", "4096", "--parallel", "2"]
    doc = valid(cli(*args, "--json"), "inferfleet.gguf.inspect/v1")
    assert doc["architecture"] == "gemma3" and doc["kv"]["context"]["parallel"] == 2


def _gguf_fleet(tmp_path: Path) -> Path:
    """A fleet whose one service serves a Gemma 3-shaped GGUF built here (a path model)."""
    (tmp_path / "models").mkdir()
    model = gemma3_like().write(tmp_path / "models" / "tiny.gguf")
    data = {
        "version": 1,
        "hosts": {"box": {"address": "localhost", "devices": [
            {"name": "cpu0", "vendor": "cpu", "memory": "2GiB"},
        ]}},
        "runtimes": {"llama": {"kind": "llama.cpp", "binary": "/usr/bin/true"}},
        "models": {"tiny": {
            "source": {"path": str(model.parent)},
            "files": [{
                "path": model.name,
                "size": model.stat().st_size,
                "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            }],
        }},
        "services": {"svc": {
            "host": "box", "runtime": "llama", "model": "tiny", "port": free_port(),
            "ctx_per_slot": 4096, "parallel": 2, "devices": ["cpu0"],
        }},
    }  # fmt: skip
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_budget_with_solve(cli: Cli, tmp_path: Path) -> None:
    fleet = _gguf_fleet(tmp_path)
    doc = valid(
        cli("budget", "svc", "-f", str(fleet), "--solve", "--json"),
        "inferfleet.budget/v1",
        codes=(0, 1),
    )
    (service,) = doc["services"]
    assert service["service"] == "svc" and service["solve"] is not None


def test_models_verify_of_a_path_model(cli: Cli, tmp_path: Path) -> None:
    fleet = _gguf_fleet(tmp_path)
    doc = valid(
        cli("models", "verify", "tiny", "-f", str(fleet), "--json"), "inferfleet.models.verify/v1"
    )
    assert doc["ok"] is True and doc["files"][0]["path"] == "tiny.gguf"


def test_status_down_and_probe_of_a_service_that_is_not_running(cli: Cli, tmp_path: Path) -> None:
    fleet = _gguf_fleet(tmp_path)
    status = valid(
        cli("status", "--file", str(fleet), "--json"), "inferfleet.status/v2", codes=(0, 1)
    )
    assert status["services"][0]["state"] in {"stopped", "down"}
    down = valid(cli("down", "--file", str(fleet), "--json"), "inferfleet.down/v1")
    assert down["services"][0]["outcome"] == "not-running"
    probe = valid(
        cli("probe", "svc", "--file", str(fleet), "--json"), "inferfleet.probe/v1", codes=(1,)
    )
    assert probe["ok"] is False and probe["counts"]["fail"] >= 1


def test_apply_dry_run_and_facts_in_a_git_checkout(cli: Cli, tmp_path: Path) -> None:
    fleet = _gguf_fleet(tmp_path)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "fleet")
    apply = valid(
        cli("apply", "--file", str(fleet), "--host", "box", "--dry-run", "--json"),
        "inferfleet.apply/v1",
        codes=(0, 1),
    )
    assert apply["dry_run"] is True and apply["host"] == "box"
    result = cli("apply", "--file", str(fleet), "--host", "box", "--facts")
    assert result.code == 0, result.stderr
    (line,) = result.stdout.splitlines()
    facts = json.loads(line)
    assert facts["schema"] == "inferfleet.facts/v1"
    jsonschema.validate(facts, documents.json_schema("inferfleet.facts/v1"))
    PRODUCED.add("inferfleet.facts/v1")


def test_archive_list_restore_and_prune(cli: Cli, tmp_path: Path) -> None:
    from inferfleet.io.archive import Archive, Keeper

    state = tmp_path / "state"
    unit = tmp_path / "etc" / "web.service"
    unit.parent.mkdir()
    unit.write_text("[Unit]\n")
    Keeper(Archive(state), service="web", revision="a" * 40).remove(unit)
    (state / "archive" / "20200101T000000.000000Z-x-none-retire").mkdir()  # no index: damaged
    where = ["--state-dir", str(state), "--json"]
    listed = valid(cli("archive", "list", *where), "inferfleet.archive.list/v1")
    good, damaged = sorted(listed["entries"], key=lambda e: e["problem"] is not None)
    assert good["files"][0]["path"] == str(unit) and damaged["problem"]
    restored = valid(
        cli("archive", "restore", good["entry"], *where), "inferfleet.archive.restore/v1"
    )
    assert restored["files"] == [{"path": str(unit), "outcome": "restored"}]
    pruned = valid(
        cli("archive", "prune", "--older-than", "365d", *where), "inferfleet.archive.prune/v1"
    )
    assert pruned["entries"] == [damaged["entry"]] and pruned["freed_entries"] == 1


def test_the_board_serves_the_status_document(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from inferfleet.status import Collector, Options
    from inferfleet.status.web import create_app

    loaded = load_fleet(_gguf_fleet(tmp_path))
    app = create_app(Collector(loaded, Options(ssh=False)))
    with TestClient(app, base_url="http://localhost") as client:  # HostCheck: a local name
        answer = client.get("/api/status")
    assert answer.status_code == 200
    doc = answer.json()
    jsonschema.validate(doc, documents.json_schema("inferfleet.status/v2"))
    assert doc["inferfleet"]


def test_doctor_on_this_machine(cli: Cli) -> None:
    doc = valid(cli("doctor", "--json"), "inferfleet.doctor/v1")
    assert doc["hosts"][0]["facts"]["ram"] > 0


@pytest.mark.parametrize("schema", documents.SCHEMA_IDS)
def test_every_document_type_has_a_valid_json_schema(schema: str) -> None:
    derived = documents.json_schema(schema)
    jsonschema.Draft202012Validator.check_schema(derived)
    assert derived["$id"] == schema


def test_every_document_is_produced_here_or_listed_as_needing_a_server() -> None:
    """Runs last in this module: the documents above plus the listed ones are all of them."""
    if len(PRODUCED) < len(documents.SCHEMA_IDS) - len(NOT_PRODUCED_HERE):
        pytest.skip(
            "partial run: run with the whole module (a test above was deselected or skipped)"
        )
    assert set(documents.SCHEMA_IDS) == PRODUCED | NOT_PRODUCED_HERE
    assert not PRODUCED & NOT_PRODUCED_HERE
