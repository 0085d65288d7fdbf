"""Reading a host's facts: the commands and files ``doctor`` looks at (the effects).

Every file is read under ``root`` (``/`` on a real host; a fake tree in tests),
every command through :func:`inferfleet.io.process.run` with a short timeout,
and a missing tool is a fact ("not installed"), never an error. The parsing is
:mod:`inferfleet.doctor.parse`.
"""

from __future__ import annotations

import getpass
import os
import platform
import resource
import shutil
from pathlib import Path

from inferfleet.backends import quadlet
from inferfleet.backends.systemd import LINGER_DIR
from inferfleet.doctor import parse
from inferfleet.doctor.parse import Disk, EnvFile, Facts, Gpu
from inferfleet.errors import ProcessError
from inferfleet.io import process

TOOL_TIMEOUT = 20.0
NVIDIA_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,name,memory.total,pci.bus_id,uuid,compute_cap",
    "--format=csv,noheader,nounits",
]
# Drivers before 510 know no compute_cap field (the whole query fails): asked again without.
NVIDIA_QUERY_OLD = [NVIDIA_QUERY[0], NVIDIA_QUERY[1].removesuffix(",compute_cap"), NVIDIA_QUERY[2]]
NVIDIA_USED = ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"]


def _tool(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) when the tool ran fine, (None, why) when it failed, (None, None) if absent."""
    if shutil.which(argv[0]) is None:
        return None, None
    try:
        done = process.run(argv, timeout=TOOL_TIMEOUT, check=False)
    except ProcessError as exc:
        return None, f"{argv[0]}: {exc.message}"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"{argv[0]} exited {done.returncode}: {parse.clean(tail[0], 200)}"
    return done.stdout, None


def _read(path: Path, limit: int = 1 << 20) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def drm_files(root: Path) -> dict[str, dict[str, str]]:
    """The amdgpu sysfs files of every ``cardN`` under ``root``/sys/class/drm."""
    cards: dict[str, dict[str, str]] = {}
    folder = root / "sys" / "class" / "drm"
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError:
        return cards
    for name in names:
        device = folder / name / "device"
        files = {
            f: _read(device / f, 4096)
            for f in (
                "vendor",
                "mem_info_vram_total",
                "mem_info_vram_used",
                "mem_info_gtt_total",
                "product_name",
            )
        }
        try:
            files["bus"] = (device.resolve()).name if device.is_symlink() else ""
        except OSError:
            files["bus"] = ""
        cards[name] = files
    return cards


def kfd_nodes(root: Path) -> list[str]:
    """The KFD topology nodes' ``properties`` files (one per CPU socket and GPU)."""
    folder = root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    try:
        nodes = sorted(folder.iterdir())
    except OSError:
        return []
    return [_read(node / "properties", 65536) for node in nodes[:256]]


def discover_gpus(
    root: Path = Path("/"), *, tools: bool = True
) -> tuple[list[Gpu], str | None, list[str]]:
    """GPUs, where they were found, and notes of tools that failed.

    The vendors' tools first (nvidia-smi, then amd-smi, then rocm-smi); the
    amdgpu driver's sysfs files fill in the GTT aperture of AMD GPUs (L-31)
    and stand alone where no AMD tool is installed. ``tools=False`` (a fake
    ``root`` in tests) reads sysfs only.
    """
    notes: list[str] = []
    gpus: list[Gpu] = []
    source: str | None = None
    if tools:
        out, why = _tool(NVIDIA_QUERY)
        if why is not None:
            out, why = _tool(NVIDIA_QUERY_OLD)
        notes += [why] if why else []
        if out is not None and (found := parse.nvidia_smi(out)):
            gpus, source = found, "nvidia-smi"
    apu_host = parse.kfd_apu(kfd_nodes(root))
    sysfs = parse.drm_cards(drm_files(root), apu_host)
    amd: list[Gpu] = []
    if tools:
        for argv, parser in (
            (["amd-smi", "static", "--json"], parse.amd_smi_static),
            (["rocm-smi", "--showmeminfo", "vram", "--json"], parse.rocm_smi_vram),
        ):
            out, why = _tool(argv)
            notes += [why] if why else []
            if out is not None and (amd := parser(out)):
                break
    if amd:
        amd = [_with_gtt(g, sysfs, apu_host) for g in amd]
        source = source or amd[0].source
    elif sysfs:
        amd = sysfs
        source = source or "sysfs"
    return gpus + amd, source, notes


def device_memory_used(root: Path = Path("/"), *, tools: bool = True) -> dict[str, int]:
    """Bytes in use on each GPU the host can tell about (``nvidia:0``, ``amd:1``).

    nvidia-smi for NVIDIA GPUs, the amdgpu driver's ``mem_info_vram_used`` for
    AMD ones; a GPU nothing reports on is absent (a bench then judges host
    memory only, L-52). ``tools=False`` (a fake ``root`` in tests) reads sysfs only.
    """
    used: dict[str, int] = {}
    if tools:
        out, _why = _tool(NVIDIA_USED)
        if out is not None:
            used |= {f"nvidia:{i}": n for i, n in parse.nvidia_smi_used(out).items()}
    used |= {f"amd:{i}": n for i, n in parse.drm_vram_used(drm_files(root)).items()}
    return used


def memory_used(root: Path = Path("/"), *, tools: bool = True) -> dict[str, int]:
    """What ``status`` shows per host: bytes in use on each GPU the host can tell about
    (:func:`device_memory_used`) and in its RAM (``ram``: MemTotal - MemAvailable, the
    memory of a CPU host's models)."""
    used = device_memory_used(root, tools=tools)
    mem = parse.meminfo(_read(root / "proc" / "meminfo"))
    if mem.ram:
        used["ram"] = max(0, mem.ram - mem.available)
    return used


def _with_gtt(gpu: Gpu, sysfs: list[Gpu], apu_host: bool | None) -> Gpu:
    """A tool's GPU with the GTT aperture sysfs reports for the same position."""
    same = [s for s in sysfs if s.index == gpu.index]
    if not same or same[0].gtt is None:
        return gpu
    unified = parse.is_apu(gpu.memory, same[0].gtt, apu_host)
    return Gpu(gpu.vendor, gpu.index, gpu.name, gpu.memory, gpu.bus or same[0].bus, gpu.uuid,
               same[0].gtt, unified, gpu.source)  # fmt: skip


def disk(path: str) -> Disk:
    """Free bytes of the file system that will hold ``path`` (its nearest existing folder).

    A folder on the way this user may not enter (a root-only ``/root`` when
    doctor runs as the ssh user) is a fact, not an error: the free space is
    that of the nearest folder it can reach, and ``denied`` names the closed one.
    """
    target = Path(path).expanduser()
    probe = target
    while probe != probe.parent and not _exists(probe):
        probe = probe.parent
    denied = None
    for folder in [*reversed(target.parents), target]:
        try:
            folder.lstat()
        except OSError:
            break  # not there (yet): nothing further down to be closed
        if folder.is_dir() and not os.access(folder, os.X_OK):
            denied = str(folder)
            break
    try:
        usage = shutil.disk_usage(probe)
    except OSError:
        return Disk(path, None, None, denied)
    return Disk(path, usage.free, usage.total, denied)


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; False, not PermissionError, when a folder above is closed."""
    try:
        return path.exists()
    except OSError:
        return False


def env_file(path: str) -> EnvFile:
    """Whether this user can read ``path`` (opened, nothing read: it holds secrets).

    A root-only file is a fact (``permission denied``), never a traceback.
    """
    try:
        with Path(path).expanduser().open("rb"):
            return EnvFile(path, None)
    except PermissionError:
        return EnvFile(path, "permission denied")
    except FileNotFoundError:
        return EnvFile(path, "missing")
    except OSError as exc:
        return EnvFile(path, parse.clean(exc.strerror or str(exc), 200))


def gather(
    disks: list[str],
    root: Path = Path("/"),
    *,
    tools: bool = True,
    env_files: list[str] | None = None,
) -> Facts:
    """Every fact of this machine (``root`` is where /proc, /sys and /etc are read);
    ``env_files`` are files inferfleet reads as this user, checked for access."""
    user = getpass.getuser()
    gpus, source, notes = discover_gpus(root, tools=tools)
    mem = parse.meminfo(_read(root / "proc" / "meminfo"))
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    facts = Facts(
        user=user,
        python=platform.python_version(),
        gpus=gpus,
        gpu_source=source,
        gpu_notes=notes,
        ram=mem.ram,
        available=mem.available,
        swap_total=mem.swap_total,
        swap_free=mem.swap_free,
        memlock=None if soft == resource.RLIM_INFINITY else soft,
        subuids=parse.subids(_read(root / "etc" / "subuid"), user),
        disks=[disk(p) for p in dict.fromkeys(disks)],
        gtt_params=parse.gtt_params(_read(root / "proc" / "cmdline")),
        env_files=[env_file(p) for p in dict.fromkeys(env_files or [])],
    )
    # loginctl answers only for a user with a session or linger; the marker file is the truth
    # it reads from (backends.systemd.linger_enabled reads the same folder).
    facts.linger = _exists(root / LINGER_DIR.relative_to("/") / user)
    facts.quadlet = any(_exists(root / Path(p).relative_to("/")) for p in quadlet.GENERATORS)
    facts.user_systemd = _exists(root / "run" / "user" / str(os.getuid()) / "systemd" / "private")
    enforce = root / "sys" / "fs" / "selinux" / "enforce"
    facts.selinux = parse.selinux_mode(_read(enforce, 16) if _exists(enforce) else None)
    if tools:
        out, _ = _tool(["loginctl", "show-user", user, "--property=Linger"])
        if out is not None and (said := parse.lingering(out)) is not None:
            facts.linger = said
        out, _ = _tool(["podman", "--version"])
        facts.podman = parse.podman_version(out) if out is not None else None
        if sum(1 for g in gpus if g.vendor == "amd") > 1:
            out, _ = _tool(["lspci", "-vvv"])
            facts.pci = parse.lspci_atomics(out or "")
    return facts
