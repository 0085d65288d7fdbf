"""The one locator: a model's folder and the file its loader opens (L-04)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferfleet.artifacts.locate import main_file, main_path, model_dir, model_dir_on
from inferfleet.artifacts.manifest import ManifestEntry
from inferfleet.fleetfile.fleet import Model

SHA = "a" * 64


def entries(*names: str) -> list[ManifestEntry]:
    return [ManifestEntry(name, 1, "sha256", SHA) for name in names]


def model(**fields: object) -> Model:
    files = fields.pop("files", [{"path": "x.gguf", "size": 1}])
    return Model.model_validate({"source": {"hub": "org/m"}, "files": files, **fields})


def test_a_single_gguf_is_the_main_file() -> None:
    assert main_file(model(), entries("README.md", "model-Q4_K_M.gguf")) == "model-Q4_K_M.gguf"


def test_a_split_gguf_loads_part_1_never_a_concatenation_L04() -> None:
    parts = entries(
        "Q8/big-00003-of-00003.gguf", "Q8/big-00001-of-00003.gguf", "Q8/big-00002-of-00003.gguf"
    )
    assert main_file(model(), [*parts, *entries("README.md")]) == "Q8/big-00001-of-00003.gguf"


def test_the_projector_is_not_the_main_file() -> None:
    files = entries("mmproj-model-f16.gguf", "model-Q4_K_M.gguf")
    assert main_file(model(), files) == "model-Q4_K_M.gguf"


def test_an_explicit_main_wins() -> None:
    files = entries("a.gguf", "b.gguf")
    assert main_file(model(main="b.gguf"), files) == "b.gguf"


def test_a_safetensors_folder_has_no_main_file(tmp_path: Path) -> None:
    files = [
        {"path": "config.json", "size": 2},
        {"path": "model-00001-of-00002.safetensors", "size": 1},
        {"path": "model-00002-of-00002.safetensors", "size": 1},
    ]
    folder_model = Model.model_validate({"source": {"path": str(tmp_path)}, "files": files})
    declared = [ManifestEntry(f["path"], 1, "size", "") for f in files]
    assert main_file(folder_model, declared) is None
    assert main_path("st", folder_model, tmp_path) is None


def test_main_path_is_in_the_model_folder_on_this_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERFLEET_CACHE_DIR", str(tmp_path / "cache"))
    hub_model = model(files=[{"path": "m-00001-of-00002.gguf", "size": 1},
                             {"path": "m-00002-of-00002.gguf", "size": 1}])  # fmt: skip
    assert model_dir("m", hub_model) == tmp_path / "cache" / "models" / "m"
    assert main_path("m", hub_model, tmp_path) == (
        tmp_path / "cache" / "models" / "m" / "m-00001-of-00002.gguf"
    )
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert model_dir("m", model(dir="~/models/m")) == tmp_path / "home" / "models" / "m"


def test_folders_on_another_host_use_its_facts() -> None:
    on = {"home": "/home/ops", "cache_dir": "/home/ops/.cache/inferfleet"}
    assert model_dir_on("m", model(), **on) == "/home/ops/.cache/inferfleet/models/m"
    assert model_dir_on("m", model(dir="~/big/m"), **on) == "/home/ops/big/m"
    path_model = Model.model_validate(
        {"source": {"path": "/srv/m"}, "files": [{"path": "x.gguf", "size": 1}]}
    )
    assert model_dir_on("m", path_model, **on) == "/srv/m"
