"""``inferfleet facts record``: header facts recorded in the fleet repository, keyed by the
main file's sha256, so a clean clone without the model files (CI) judges what the host
would; a changed, damaged or foreign record is not used, and ``check`` says why."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import yaml
from check_helpers import Patch, build
from fixtures.gguf_builder import GGUFBuilder
from remote_fleet import (  # noqa: F401 - fixtures
    MODEL_NAME,
    HubServer,
    fleet,
    hub_env_fixture,
    hub_fixture,
    model_blobs_fixture,
)
from test_check_header_rules import model

S = "services"
# Only the llama.cpp service and its model: every rule can judge once the facts are here.
ONLY_CHAT: Patch = {"services.serve": None, "services.web": None, "models.d": None,
                    "models.hf": None}  # fmt: skip


def write_fleet(repo: Path, folder: Path, gguf: GGUFBuilder, patch: Patch | None = None) -> Path:
    """A fleet repo at ``repo`` whose model m is the GGUF written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    main = gguf.write(folder / "m.gguf", data=False)
    files = [{"path": "m.gguf", "size": main.stat().st_size}]
    data = build({**ONLY_CHAT, "models.m.source": {"path": str(folder)}, "models.m.files": files,
                  **(patch or {})})  # fmt: skip
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "fleet.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return repo / "fleet.yaml"


def clean_clone(repo: Path, to: Path) -> Path:
    """What CI checks out: the fleet file and facts/, never the model files."""
    shutil.copytree(repo, to)
    return to / "fleet.yaml"


def check_doc(cli: Any, path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = cli("check", str(path), "--json", *args)
    return result.code, json.loads(result.stdout)


def test_recorded_from_a_local_file_a_clean_clone_judges_it(
    cli: Any, tmp_path: Path, hub_env: Path
) -> None:
    folder = tmp_path / "host-models"
    path = write_fleet(tmp_path / "repo", folder, model(context=32768),
                       {f"{S}.chat.ctx_per_slot": 65536})  # fmt: skip
    recorded = cli("facts", "record", str(path))
    assert recorded.code == 0, recorded.stdout + recorded.stderr
    said = " ".join(recorded.stdout.split())
    sha = hashlib.sha256((folder / "m.gguf").read_bytes()).hexdigest()
    assert f"recorded model 'm': facts/models/m.json (sha256 {sha[:12]}..." in said
    record = json.loads((tmp_path / "repo" / "facts" / "models" / "m.json").read_text())
    assert record["sha256"] == sha and record["files"]["m.gguf"]["sha256"] == sha
    assert record["main"] == "m.gguf" and record["recorded_from"].startswith("this machine's")

    shutil.rmtree(folder)  # the clean machine has no model files
    clone = clean_clone(tmp_path / "repo", tmp_path / "clone")
    code, doc = check_doc(cli, clone, "--require-facts")
    # Judged from the record: the incident (a window beyond training) is found, nothing skipped.
    assert doc["skipped"] == [], doc["skipped"]
    (note,) = doc["notes"]
    assert note.startswith("model 'm': header facts from facts/models/m.json")
    rules = {f["rule"] for f in doc["findings"]}
    assert "context-beyond-training" in rules and code == 0  # a warning
    text = cli("check", str(clone), "--strict")
    assert text.code == 1  # --strict: the warning fails, and the exit code says so
    out = " ".join(text.stdout.split())
    assert "header facts from facts/models/m.json (recorded from this machine's" in out
    # The fixed fleet passes --strict --require-facts on the clean machine.
    fixed = clone.read_text().replace("ctx_per_slot: 65536", "ctx_per_slot: 8192")
    clone.write_text(fixed)
    assert cli("check", str(clone), "--strict", "--require-facts").code == 0


def test_a_changed_file_makes_the_record_stale_and_check_says_so(
    cli: Any, tmp_path: Path, hub_env: Path
) -> None:
    folder = tmp_path / "host-models"
    path = write_fleet(tmp_path / "repo", folder, model())
    assert cli("facts", "record", str(path)).code == 0
    shutil.rmtree(folder)
    # The fleet now declares another file (its sha256 changed): the record is not used.
    data = yaml.safe_load(path.read_text())
    data["models"]["m"]["files"][0]["sha256"] = "b" * 64
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = cli("check", str(path))
    out = " ".join(result.stdout.split())
    assert "recorded facts not used" in out and "the fleet declares bbbbbbbbbbbb" in out
    assert "not checked (" in out and result.code == 0


def test_a_damaged_record_is_not_used_and_nothing_crashes(
    cli: Any, tmp_path: Path, hub_env: Path
) -> None:
    folder = tmp_path / "host-models"
    path = write_fleet(tmp_path / "repo", folder, model())
    assert cli("facts", "record", str(path)).code == 0
    shutil.rmtree(folder)
    where = tmp_path / "repo" / "facts" / "models" / "m.json"
    for damage in (b"{not json", b"[]", where.read_bytes().replace(b'"m.gguf"', b'"x.gguf"', 1)):
        where.write_bytes(damage)
        result = cli("check", str(path))
        assert result.code == 0 and "Traceback" not in result.stdout + result.stderr
        out = " ".join(result.stdout.split())
        assert "recorded facts not used" in out and "not checked (" in out
    # A clone can hold a FIFO where the record should be: refused, never waited on.
    where.unlink()
    os.mkfifo(where)
    result = cli("check", str(path))
    out = " ".join(result.stdout.split())
    assert result.code == 0 and "recorded facts not used" in out and "is a FIFO" in out


def test_a_model_without_a_source_is_not_recorded_with_the_reason(
    cli: Any, tmp_path: Path, hub_env: Path
) -> None:
    path = write_fleet(tmp_path / "repo", tmp_path / "host-models", model())
    shutil.rmtree(tmp_path / "host-models")
    result = cli("facts", "record", str(path))
    assert result.code == 1
    out = " ".join(result.stdout.split())
    assert "not recorded model 'm'" in out and "is not on this machine" in out
    assert not (tmp_path / "repo" / "facts").exists()  # nothing half-written
    bad = cli("facts", "record", str(path), "--model", "nope")
    assert bad.code == 2 and "no model named 'nope'" in bad.stderr


def test_recorded_from_the_hub_a_clean_clone_judges_offline(
    hub: HubServer, cli: Any, tmp_path: Path, hub_env: Path
) -> None:
    """The Hub test server stands in for huggingface.co (no Internet here)."""
    path = fleet(tmp_path / "repo", {"hub": "test/gemma-whole", "revision": "main"},
                 service={"ctx_per_slot": 65536, "client": {"chat": True, "max_tokens": 512}},
                 model_dir=tmp_path / "not-fetched")  # fmt: skip
    recorded = cli("facts", "record", str(path))
    assert recorded.code == 0, recorded.stdout + recorded.stderr
    assert "from hub test/gemma-whole@main" in " ".join(recorded.stdout.split())
    asked = len(hub.log)
    shutil.rmtree(hub_env)  # no cached header: only the record can answer
    clone = clean_clone(path.parent, tmp_path / "clone")
    code, doc = check_doc(cli, clone, "--offline")
    assert len(hub.log) == asked  # no request
    header_skips = [s for s in doc["skipped"] if s["rule"] == "context-beyond-training"]
    assert header_skips == [] and "context-beyond-training" in {f["rule"] for f in doc["findings"]}
    assert MODEL_NAME.endswith(".gguf")
