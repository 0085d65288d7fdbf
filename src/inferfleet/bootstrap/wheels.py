"""This inferfleet as a wheel, and a wheelhouse of its dependencies for a host, cached.

A host gets exactly the inferfleet that runs here: the wheel is built from
this installation's source tree (an editable or source install) with pip,
and cached under the cache dir keyed by the version and a digest of the
source files, so a rebuilt tree gets a new wheel and an unchanged one is
never built twice. An installation without a source tree asks pip for the
same version (``pip download inferfleet==VERSION``); ``--wheel`` names one.

A wheelhouse is for hosts that reach no package index: ``pip download`` of
the wheel's dependencies here, binary only, for the host's Python version,
CPU and glibc (read there), cached by those and by the wheel's requirement
lines; the host then installs with ``--no-index --find-links``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from inferfleet import __version__, paths
from inferfleet.bootstrap.errors import BootstrapError
from inferfleet.errors import ProcessError, UsageError
from inferfleet.io import process
from inferfleet.io.files import staged_directory

Progress = Callable[[str], None]
PIP_TIMEOUT = 900.0
# A wheel file name: NAME-VERSION(-BUILD)?-PY-ABI-PLATFORM.whl (PEP 427).
_WHEEL_RE = re.compile(r"^inferfleet-([A-Za-z0-9.+!_]+)-(?:\d[^-]*-)?[^-]+-[^-]+-[^-]+\.whl$")
# The oldest glibc manylinux wheels name (manylinux1 = glibc 2.5).
_OLDEST_GLIBC_MINOR = 5
_LEGACY_ALIASES = {5: "manylinux1", 12: "manylinux2010", 17: "manylinux2014"}


@dataclass(frozen=True)
class Wheel:
    path: Path
    version: str
    sha256: str
    origin: str  # "source tree DIGEST", "pip download", "given"


@dataclass(frozen=True)
class HostPlatform:
    """What a host's pip accepts: its Python, CPU and C library (read on the host)."""

    python: tuple[int, int, int]
    machine: str  # x86_64, aarch64
    glibc: tuple[int, int] | None  # None: not glibc (musl): binary wheels for manylinux do not fit

    @property
    def tag(self) -> str:
        libc = f"glibc{self.glibc[0]}.{self.glibc[1]}" if self.glibc else "nolibc"
        return f"cp{self.python[0]}{self.python[1]}-{self.machine}-{libc}"

    def platforms(self) -> list[str]:
        """Every manylinux platform tag a pip on this host installs, newest first."""
        if self.glibc is None or self.glibc[0] != 2:
            return []
        found: list[str] = []
        for minor in range(self.glibc[1], _OLDEST_GLIBC_MINOR - 1, -1):
            found.append(f"manylinux_2_{minor}_{self.machine}")
            if minor in _LEGACY_ALIASES:
                found.append(f"{_LEGACY_ALIASES[minor]}_{self.machine}")
        return found


def source_tree() -> Path | None:
    """The source tree this inferfleet runs from (an editable or source install), if any."""
    import inferfleet

    root = Path(inferfleet.__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "src" / "inferfleet").is_dir():
        return root
    return None


def _source_files(root: Path) -> Iterator[Path]:
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            yield root / name
    for path in sorted((root / "src" / "inferfleet").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def source_digest(root: Path) -> str:
    """sha256 over the relative path and bytes of every file that goes into the wheel."""
    digest = hashlib.sha256()
    for path in _source_files(root):
        relative = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(relative).to_bytes(4, "big") + relative)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_version(path: Path) -> str:
    match = _WHEEL_RE.match(path.name)
    if match is None:
        raise UsageError(
            f"{path.name} is not an inferfleet wheel file name",
            where=str(path),
            hint="give the inferfleet-VERSION-py3-none-any.whl that pip or `pip wheel` wrote",
        )
    return match[1]


def _one_wheel(folder: Path) -> Path | None:
    found = sorted(folder.glob("inferfleet-*.whl")) if folder.is_dir() else []
    return found[0] if len(found) == 1 else None


def inferfleet_wheel(given: Path | None, progress: Progress) -> Wheel:
    """The wheel of this very inferfleet (built once per source digest, then cached)."""
    if given is not None:
        if not given.is_file():
            raise UsageError(f"no wheel at {given}", hint="give the path of an existing .whl")
        version = wheel_version(given)
        if version != __version__:
            raise UsageError(
                f"{given.name} is inferfleet {version}, this is inferfleet {__version__}",
                where=str(given),
                hint="hosts run the same version as the operator: give this version's wheel",
            )
        return Wheel(given, version, _sha256(given), "given")
    root = source_tree()
    cache = paths.cache_dir() / "bootstrap" / "wheels"
    if root is not None:
        digest = source_digest(root)
        folder = cache / f"{__version__}-{digest[:16]}"
        origin = f"source tree {digest[:12]}"
        argv = ["wheel", "--no-deps", "--wheel-dir", "{dest}", str(root)]
    else:
        folder = cache / f"{__version__}-release"
        origin = "pip download"
        argv = ["download", "--no-deps", "--only-binary=:all:", "--dest", "{dest}"]
        argv.append(f"inferfleet=={__version__}")
    found = _one_wheel(folder)
    if found is None:
        progress(f"building the inferfleet {__version__} wheel ({origin})")
        if folder.exists():
            shutil.rmtree(folder)  # a damaged cache entry (not exactly one wheel): made again
        with staged_directory(folder) as staging:
            _pip([a.replace("{dest}", str(staging)) for a in argv], f"build the {origin} wheel")
            if _one_wheel(staging) is None:
                raise BootstrapError(
                    f"pip made no single inferfleet wheel in {staging}",
                    hint="run `pip wheel --no-deps .` in the source tree by hand to see why",
                )
        found = _one_wheel(folder)
        assert found is not None
    return Wheel(found, __version__, _sha256(found), origin)


def requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines (its METADATA), as pip reads them."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise BootstrapError(
                f"{wheel.name} has no single METADATA file", hint="rebuild the wheel"
            )
        info = archive.getinfo(names[0])
        if info.file_size > 1 << 20:
            raise BootstrapError(f"{wheel.name}: METADATA is too large", hint="rebuild the wheel")
        text = archive.read(info).decode("utf-8", errors="replace")
    header = text.split("\n\n", 1)[0]
    return [
        line.split(":", 1)[1].strip()
        for line in header.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def wheelhouse(wheel: Wheel, target: HostPlatform, progress: Progress) -> Path:
    """A folder of binary wheels of every dependency of ``wheel``, for ``target`` (cached)."""
    platforms = target.platforms()
    if not platforms:
        raise BootstrapError(
            f"no wheelhouse can be built here for a {target.machine} host without glibc",
            hint="give the host a package index (--deps index) or install inferfleet there by hand",
        )
    lines = "\n".join(sorted(requirements(wheel.path)))
    key = hashlib.sha256(f"{target.tag}\n{lines}".encode()).hexdigest()[:16]
    folder = paths.cache_dir() / "bootstrap" / "wheelhouses" / f"{target.tag}-{key}"
    marker = folder / ".complete"
    if marker.is_file():
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    progress(f"downloading a wheelhouse for {target.tag} ({lines.count(chr(10)) + 1} requirements)")
    major, minor = target.python[:2]
    argv = ["download", "--only-binary=:all:", "--python-version", f"{major}.{minor}"]
    argv += ["--implementation", "cp", "--abi", f"cp{major}{minor}"]
    for platform in platforms:
        argv += ["--platform", platform]
    with staged_directory(folder) as staging:
        _pip([*argv, "--dest", str(staging), str(wheel.path)], "download the wheelhouse")
        for own in staging.glob("inferfleet-*.whl"):
            own.unlink()  # the wheel itself travels on its own (its digest may change)
        (staging / ".complete").write_text("")
    return folder


def _pip(args: list[str], what: str) -> None:
    argv = [sys.executable, "-m", "pip", *args]
    argv += ["--disable-pip-version-check", "--no-input", "--quiet"]
    try:
        done = process.run(argv, check=False, timeout=PIP_TIMEOUT)
    except ProcessError as exc:
        raise BootstrapError(f"pip could not {what}: {exc.message}", hint=exc.hint) from None
    if done.returncode != 0:
        raise BootstrapError(
            f"pip could not {what} here (status {done.returncode})",
            where="this machine",
            hint="read pip's last lines below; PIP_INDEX_URL / PIP_FIND_LINKS choose where "
            "pip looks (pip config list)",
            log_tail=_tail(done.stderr or done.stdout),
        )


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
