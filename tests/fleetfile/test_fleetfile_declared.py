"""Verified means verified: ``main`` and ``mmproj`` are declared files of the model (L-09).

A server opens only files that were fetched and checked; a ``main`` or
``mmproj`` naming anything else (``../../other/model.gguf``, a file dropped
next to the verified ones) is refused: by line for inline files, with the
model's name and its declared set for manifest models.
"""

from __future__ import annotations

from pathlib import Path

from test_fleetfile_errors import BASE

GGUF = "path: qwen3-8b-q4_k_m.gguf"
MANIFEST = (
    "# Declared file set (L-09): SIZE sha256:HEX PATH\n"
    f"5368709120 sha256:{'a' * 64} qwen3-8b-q4_k_m.gguf\n"
    f"876000000 sha256:{'b' * 64} mmproj-f16.gguf\n"
)


def validate(cli, tmp_path: Path, text: str):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path, cli("validate", str(path))


def test_inline_main_outside_the_declared_files_is_refused_by_line(cli, tmp_path: Path) -> None:
    text = BASE.replace("    files:\n", "    main: ../../elsewhere/evil.gguf\n    files:\n", 1)
    path, result = validate(cli, tmp_path, text)
    assert result.code == 2, result
    err = " ".join(result.stderr.split())
    assert f"{path}:18:" in err, err
    assert "main file '../../elsewhere/evil.gguf' is not a declared file of model 'qwen'" in err
    assert "qwen3-8b-q4_k_m.gguf" in err


def test_inline_main_that_is_declared_is_valid(cli, tmp_path: Path) -> None:
    text = BASE.replace("    files:\n", "    main: qwen3-8b-q4_k_m.gguf\n    files:\n", 1)
    _, result = validate(cli, tmp_path, text)
    assert result.code == 0, result.stderr


def test_inline_mmproj_outside_the_declared_files_is_refused_by_line(cli, tmp_path: Path) -> None:
    text = BASE.replace("    parallel: 2\n", "    parallel: 2\n    mmproj: stray.gguf\n", 1)
    path, result = validate(cli, tmp_path, text)
    assert result.code == 2, result
    assert f"{path}:29:" in result.stderr and "not a declared file" in result.stderr


def manifest_fleet(tmp_path: Path, main: str | None, mmproj: str | None) -> Path:
    (tmp_path / "qwen.manifest").write_text(MANIFEST)
    model = "    manifest: qwen.manifest\n" + (f"    main: {main}\n" if main else "")
    text = BASE.replace(
        "    files:\n      - path: qwen3-8b-q4_k_m.gguf\n        size: 5GiB\n", model, 1
    )
    if mmproj:
        text = text.replace("    parallel: 2\n", f"    parallel: 2\n    mmproj: {mmproj}\n", 1)
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_manifest_main_outside_the_manifest_is_refused(cli, tmp_path: Path) -> None:
    path = manifest_fleet(tmp_path, "other/evil.gguf", None)
    out = tmp_path / "out"
    result = cli("render", "--file", str(path), "--out", str(out), "--no-check")
    assert result.code == 2, result
    err = " ".join(result.stderr.split())
    assert "main file 'other/evil.gguf' is not a declared file of model 'qwen'" in err, err
    assert "manifest" in err and "Traceback" not in err


def test_manifest_mmproj_outside_the_manifest_is_refused(cli, tmp_path: Path) -> None:
    path = manifest_fleet(tmp_path, None, "stray-mmproj.gguf")
    result = cli("render", "--file", str(path), "--out", str(tmp_path / "out"), "--no-check")
    assert result.code == 2, result
    err = " ".join(result.stderr.split())
    assert "projector (mmproj) 'stray-mmproj.gguf' is not a declared file" in err, err


def test_manifest_main_and_mmproj_that_are_declared_render(cli, tmp_path: Path) -> None:
    path = manifest_fleet(tmp_path, "qwen3-8b-q4_k_m.gguf", "mmproj-f16.gguf")
    out = tmp_path / "out"
    result = cli("render", "--file", str(path), "--out", str(out), "--no-check")
    assert result.code == 0, result.stderr
    argv = (out / "hosts" / "gpu1" / "chat.argv.json").read_text()
    assert "qwen3-8b-q4_k_m.gguf" in argv and "mmproj-f16.gguf" in argv
