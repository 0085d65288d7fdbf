"""The rendered llama.cpp argv, run by the real llama-server on the real model.

Every flag the adapter emits must be one llama-server b11434 accepts (an
unknown or malformed flag exits at once), and the ``/metrics`` series the
recording rules are built on must be the ones the server really serves.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from inferfleet.artifacts.manifest import declared_files
from inferfleet.artifacts.materialise import materialise
from inferfleet.checks.engine import run_checks
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.deploy.pins import pin_of
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import llamacpp_build
from inferfleet.io import http
from inferfleet.render.facts import facts_for
from inferfleet.render.launch import resolve
from inferfleet.runtimes import llamacpp

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def runtime_and_model() -> tuple[Path, Path]:
    loaded = load_fleet(embedded_example())
    source = loaded.fleet.runtimes["llama-cpp"].source
    assert source is not None
    record, _ = llamacpp_build.install(source)
    model = loaded.fleet.models["gemma3-270m"]
    files = declared_files(model, loaded.root)
    folder = materialise("gemma3-270m", model, files, lambda _t: None)
    return Path(record.binary), folder


def pinned_runtime(binary: Path) -> dict[str, str]:
    """The built llama-server as a binary runtime, pinned as `runtime pin` pins it (L-42)."""
    pin = pin_of("llama.cpp", binary)
    return {
        "kind": "llama.cpp",
        "binary": str(binary),
        "version": pin.version,
        "sha256": pin.sha256,
    }


def fleet_file(repo: Path, binary: Path, models: Path, port: int) -> Path:
    (repo / "templates").mkdir(parents=True)
    (repo / "templates" / "plain.jinja").write_text(
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"
    )
    data = {
        "version": 1,
        "hosts": {
            "here": {
                "address": "127.0.0.1",
                "checkout": str(repo),
                "devices": [{"name": "cpu0", "vendor": "cpu", "memory": "2GiB"}],
            }
        },
        "runtimes": {"lcpp": pinned_runtime(binary)},
        "models": {
            "gemma": {
                "source": {"path": str(models)},
                "files": [{"path": "gemma-3-270m-q4_k_m.gguf", "size": 253113024}],
            }
        },
        "services": {
            "g": {
                "host": "here",
                "runtime": "lcpp",
                "model": "gemma",
                "alias": "gemma-under-test",
                "port": port,
                "ctx_per_slot": 1024,
                "parallel": 2,
                "devices": ["cpu0"],
                "tensor_overrides": [
                    {"pattern": r"blk\.(1[0-7])\.ffn_(up|down)", "device": "CPU"},
                    {"pattern": "ffn_gate", "device": "CPU"},
                ],
                "speculative": {"types": ["ngram-mod"]},
                "chat_template_file": "templates/plain.jinja",
                "chat_template_kwargs": {"house_style": "terse"},
                "client": {"tools": True, "max_tokens": 256},
                "extra_args": ["--threads", "2"],
            }
        },
    }
    path = repo / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_real_llama_server_takes_the_rendered_argv_and_serves_the_metrics_we_alert_on(
    runtime_and_model: tuple[Path, Path], tmp_path: Path, port: int
) -> None:
    binary, models = runtime_and_model
    loaded = load_fleet(fleet_file(tmp_path / "repo", binary, models, port))
    report = run_checks(loaded)
    # The header rules ran on the real file: the overrides match its tensors (L-17).
    assert [f.rule for f in report.findings] == []
    assert not [s for s in report.skipped if s.rule == "override-matches-no-tensor"]
    argv = resolve(loaded.fleet, loaded.root, "g", facts_for(loaded.fleet)["here"]).argv
    assert "--override-tensor" in argv and "--jinja" in argv and "--spec-type" in argv
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        metrics = ""
        with http.client(timeout=5.0) as client:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
                with contextlib.suppress(Exception):
                    if client.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                        break
                time.sleep(0.2)
            else:
                pytest.fail("llama-server did not become healthy in 90 s")
            models_doc = client.get(f"http://127.0.0.1:{port}/v1/models").json()
            metrics = client.get(f"http://127.0.0.1:{port}/metrics").text
        assert models_doc["data"][0]["id"] == "gemma-under-test"
        assert models_doc["data"][0]["meta"]["n_ctx"] == 1024  # the per-slot window (L-25)
        for series in (
            llamacpp.TRAITS.metrics.running,
            llamacpp.TRAITS.metrics.waiting,
            llamacpp.TRAITS.metrics.prompt_tokens,
            llamacpp.TRAITS.metrics.generation_tokens,
        ):
            assert f"\n{series} " in metrics, series
    finally:
        proc.kill()  # by pid, never by name (L-43)
        proc.wait(10)
        log.close()
