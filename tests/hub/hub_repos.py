"""Test repos built from the real test model (Gemma 3 270M Q4_K_M, 253 MB).

Nothing is copied: every file is a list of segments (slices of the model
on disk, plus small headers), served with sendfile. Three shapes of the
same model: whole, split with llama.cpp's gguf-split layout (L-04), and cut
into ``.partNofM`` fragments (L-05). Hashes are computed once per session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gguf_splitter import split_name, split_segments
from helpers.real_model import gemma
from hubserver import Blob, Repo, RepoFile

MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
MODEL_SIZE = 253_113_024
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SPLIT_COUNT = 3
FRAGMENT_COUNT = 11  # more than 9, so numeric and lexical order differ (L-05)
SMALL_SIZE = 3 << 20
README = b"# test model\n\nGemma 3 270M Q4_K_M, served by the test Hub.\n"
CONFIG = json.dumps({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text"}).encode()


def model_path() -> Path:
    """The real model (tests/helpers/real_model.py: assembled and verified once per machine)."""
    path = gemma()
    assert path.name == MODEL_NAME and path.stat().st_size == MODEL_SIZE, path
    return path


@dataclass(frozen=True)
class Blobs:
    model: Path
    whole: Blob
    split: tuple[tuple[str, Blob], ...]
    fragments: tuple[tuple[str, Blob], ...]
    small: Blob


@cache
def blobs() -> Blobs:
    model = model_path()
    whole = Blob([(model, 0, MODEL_SIZE)], sha256=MODEL_SHA256)
    prefix = MODEL_NAME.removesuffix(".gguf")
    split = tuple(
        (split_name(prefix, i + 1, SPLIT_COUNT), Blob(segments).hashed())
        for i, segments in enumerate(split_segments(model, SPLIT_COUNT))
    )
    step = -(-MODEL_SIZE // FRAGMENT_COUNT)
    fragments = tuple(
        (
            f"{MODEL_NAME}.part{i + 1}of{FRAGMENT_COUNT}",
            Blob([(model, i * step, min(step, MODEL_SIZE - i * step))]).hashed(),
        )
        for i in range(FRAGMENT_COUNT)
    )
    small = Blob([(model, 0, SMALL_SIZE)]).hashed()
    return Blobs(model, whole, split, fragments, small)


def _text(path: str, data: bytes) -> RepoFile:
    return RepoFile(path, Blob([data]).hashed(), lfs=False)


def whole_repo(repo_id: str = "test/gemma-whole") -> Repo:
    b = blobs()
    files = [
        RepoFile(MODEL_NAME, b.whole, lfs=True),
        _text("README.md", README),
        _text("config.json", CONFIG),
    ]
    return Repo(repo_id, {f.path: f for f in files})


def split_repo(repo_id: str = "test/gemma-split") -> Repo:
    files = [RepoFile(name, blob, lfs=True) for name, blob in blobs().split]
    files.append(_text("README.md", README))
    return Repo(repo_id, {f.path: f for f in files})


def fragment_repo(repo_id: str = "test/gemma-parts") -> Repo:
    files = [RepoFile(name, blob, lfs=True) for name, blob in blobs().fragments]
    files.append(_text("README.md", README))
    return Repo(repo_id, {f.path: f for f in files})


def small_repo(
    repo_id: str = "test/small", *, gated: bool = False, private: bool = False, extra: int = 0
) -> Repo:
    """A 3 MiB slice of the model plus a README; ``extra`` more LFS slices."""
    b = blobs()
    files = [RepoFile("model-small.gguf", b.small, lfs=True), _text("README.md", README)]
    for i in range(extra):
        start = (i + 1) * SMALL_SIZE
        files.append(
            RepoFile(f"extra-{i}.bin", Blob([(b.model, start, SMALL_SIZE)]).hashed(), lfs=True)
        )
    return Repo(repo_id, {f.path: f for f in files}, gated=gated, private=private)
