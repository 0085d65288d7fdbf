"""Pure parsers for what ``doctor`` reads on a host, one per tool or file.

Each takes the tool's text (captured in tests/fixtures/doctor with the tool's
version noted) and returns data; none runs anything. Malformed input gives
what could be read and never raises: a host's tools are outside input, and a
doctor that crashes on an odd line tells the user nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024
# Units amd-smi prints next to a value ({"value": 24560, "unit": "MB"}); AMD's MB are MiB.
_UNITS = {
    "B": 1,
    "KB": 1024,
    "MB": MIB,
    "GB": 1024 * MIB,
    "KIB": 1024,
    "MIB": MIB,
    "GIB": 1024 * MIB,
}
# An APU's dedicated carve-out is small (512 MiB .. 4 GiB by default); its real budget is
# the GTT aperture in system RAM (L-31). A discrete card reports its whole VRAM.
APU_VRAM_MAX = 4 * 1024 * MIB
_CARD = re.compile(r"^card\d+$")


@dataclass(frozen=True)
class Gpu:
    vendor: str  # nvidia | amd | intel
    index: int  # the runtime's index among this vendor's GPUs
    name: str
    memory: int  # bytes of dedicated memory (VRAM)
    bus: str = ""
    uuid: str = ""
    gtt: int | None = None  # bytes of the GTT aperture (AMD, from sysfs)
    unified: bool = False  # an APU: its budget is the GTT aperture (L-31)
    source: str = ""
    arch: str = ""  # sm_86 (NVIDIA compute capability 8.6), gfx1100 (AMD): what a build targets


@dataclass(frozen=True)
class MemInfo:
    ram: int
    available: int
    swap_total: int
    swap_free: int


@dataclass(frozen=True)
class PciAtomics:
    bus: str
    description: str
    gpu: bool  # an AMD display/VGA device (not a bridge)
    atomics: tuple[str, ...] = field(default_factory=tuple)  # "32bit", "64bit", "128bitCAS"

    @property
    def supported(self) -> bool:
        """ROCm's multi-GPU peer traffic needs 64-bit completer atomics (ROCm docs)."""
        return "64bit" in self.atomics


def _int(text: object) -> int | None:
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def clean(text: object, limit: int = 120) -> str:
    """Printable text only, bounded (a device name reaches a terminal and a YAML snippet)."""
    return "".join(c for c in str(text) if c.isprintable())[:limit].strip()


def nvidia_smi(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=index,name,memory.total,pci.bus_id,uuid[,compute_cap]
    --format=csv,noheader,nounits``: memory is in MiB; the compute capability (drivers
    from 510 on) is the build's architecture (8.6: sm_86)."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) not in (5, 6):
            continue
        index, mib = _int(cells[0]), _int(cells[2])
        if index is None or mib is None:
            continue
        cap = re.fullmatch(r"([1-9][0-9]?)\.([0-9])", cells[5]) if len(cells) == 6 else None
        gpus.append(
            Gpu("nvidia", index, clean(cells[1]), mib * MIB, clean(cells[3]), clean(cells[4]),
                source="nvidia-smi", arch=f"sm_{cap[1]}{cap[2]}" if cap else "")
        )  # fmt: skip
    return gpus


def _dict(node: object) -> dict[str, Any]:
    return node if isinstance(node, dict) else {}


def _sized(node: Any) -> int | None:
    if isinstance(node, dict):
        value, unit = node.get("value"), str(node.get("unit", "MB")).upper()
        number = _int(value)
        return None if number is None or unit not in _UNITS else number * _UNITS[unit]
    number = _int(node)  # amd-smi 6.0: a bare number of MB
    return None if number is None else number * MIB


def amd_smi_static(text: str) -> list[Gpu]:
    """``amd-smi static --json``: a list of GPUs (amd-smi 24.x) or ``{"gpu_data": [...]}``
    (25.x and later); VRAM is ``vram.size`` as ``{"value", "unit"}``."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if isinstance(data, dict):
        data = data.get("gpu_data", [])
    if not isinstance(data, list):
        return []
    gpus: list[Gpu] = []
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            continue
        vram = _dict(item.get("vram"))
        size = _sized(vram.get("size", vram.get("vram_size_mb")))
        if size is None:
            continue
        asic = _dict(item.get("asic"))
        bus = _dict(item.get("bus"))
        index = _int(item.get("gpu"))
        target = str(asic.get("target_graphics_version", ""))
        gpus.append(
            Gpu("amd", position if index is None else index, clean(asic.get("market_name", "")),
                size, clean(bus.get("bdf", "")), clean(item.get("uuid", "")),
                source="amd-smi", arch=target if re.fullmatch(r"gfx[0-9a-f]{3,5}", target) else "")
        )  # fmt: skip
    return gpus


def rocm_smi_vram(text: str) -> list[Gpu]:
    """``rocm-smi --showmeminfo vram --json``: ``{"card0": {"VRAM Total Memory (B)": "..."}}``."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    gpus: list[Gpu] = []
    for key, values in data.items():
        match = re.fullmatch(r"card(\d+)", str(key))
        if match is None or not isinstance(values, dict):
            continue
        total = _int(values.get("VRAM Total Memory (B)"))
        if total is None:
            continue
        gpus.append(
            Gpu("amd", int(match.group(1)), "", total, source="rocm-smi")
        )  # fmt: skip
    return sorted(gpus, key=lambda g: g.index)


def kfd_apu(nodes: list[str]) -> bool | None:
    """Whether the KFD topology (``/sys/class/kfd/kfd/topology/nodes/N/properties``) has an
    APU: a node with both CPU cores and SIMDs. None when there is no topology to read."""
    if not nodes:
        return None
    for text in nodes:
        props = dict(line.split(None, 1) for line in text.splitlines() if len(line.split()) == 2)
        if (_int(props.get("cpu_cores_count", 0)) or 0) > 0 and (
            _int(props.get("simd_count", 0)) or 0
        ) > 0:
            return True
    return False


def is_apu(vram: int, gtt: int | None, apu_host: bool | None) -> bool:
    """An APU shares system RAM through its GTT aperture (L-31). The KFD topology says whether
    the host has one; without it a small carve-out next to a larger GTT is the sign."""
    if gtt is None or gtt <= vram or apu_host is False:
        return False
    return apu_host is True or vram <= APU_VRAM_MAX


def drm_cards(cards: dict[str, dict[str, str]], apu_host: bool | None = None) -> list[Gpu]:
    """``/sys/class/drm/cardN/device/{vendor,mem_info_vram_total,mem_info_gtt_total}``,
    read as ``{cardN: {file: text}}``: the amdgpu driver's own figures, in bytes."""
    gpus: list[Gpu] = []
    amd = sorted(
        (name for name, files in cards.items()
         if _CARD.match(name) and files.get("vendor", "").strip().lower() == "0x1002"),
        key=lambda n: int(n[4:]),
    )  # fmt: skip
    for index, name in enumerate(amd):
        files = cards[name]
        vram = _int(files.get("mem_info_vram_total", ""))
        if vram is None:
            continue
        gtt = _int(files.get("mem_info_gtt_total", ""))
        unified = is_apu(vram, gtt, apu_host)
        gpus.append(
            Gpu("amd", index, clean(files.get("product_name", "")), vram,
                clean(files.get("bus", "")), gtt=gtt, unified=unified, source="sysfs")
        )  # fmt: skip
    return gpus


def nvidia_smi_used(text: str) -> dict[int, int]:
    """``nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits``: bytes
    in use per GPU index (the tool prints MiB). Lines that do not parse are left out."""
    used: dict[int, int] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 2:
            continue
        index, mib = _int(cells[0]), _int(cells[1])
        if index is not None and mib is not None:
            used[index] = mib * MIB
    return used


def drm_vram_used(cards: dict[str, dict[str, str]]) -> dict[int, int]:
    """``/sys/class/drm/cardN/device/mem_info_vram_used`` of the amdgpu cards, in bytes,
    by the same position :func:`drm_cards` gives them."""
    amd = sorted(
        (name for name, files in cards.items()
         if _CARD.match(name) and files.get("vendor", "").strip().lower() == "0x1002"),
        key=lambda n: int(n[4:]),
    )  # fmt: skip
    used: dict[int, int] = {}
    for index, name in enumerate(amd):
        if (value := _int(cards[name].get("mem_info_vram_used", ""))) is not None:
            used[index] = value
    return used


def meminfo(text: str) -> MemInfo:
    """``/proc/meminfo``: ``MemTotal: 65831220 kB`` lines."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and (number := _int(parts[0])) is not None:
            values[key.strip()] = number * (1024 if parts[1:2] == ["kB"] else 1)
    return MemInfo(
        values.get("MemTotal", 0),
        values.get("MemAvailable", 0),
        values.get("SwapTotal", 0),
        values.get("SwapFree", 0),
    )


def key_values(text: str) -> dict[str, str]:
    """``loginctl show-user USER``: ``Key=value`` lines."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            found[key.strip()] = value.strip()
    return found


def lingering(text: str) -> bool | None:
    """``Linger=yes`` in ``loginctl show-user``; None when loginctl did not say."""
    value = key_values(text).get("Linger")
    return None if value is None else value == "yes"


def lspci_atomics(text: str) -> list[PciAtomics]:
    """``lspci -vvv``: each device's ``DevCap2: ... AtomicOpsCap: 32bit+ 64bit+ 128bitCAS-``."""
    found: list[PciAtomics] = []
    bus, description, caps = "", "", None

    def flush() -> None:
        if bus and caps is not None:
            amd = re.search(r"Advanced Micro Devices|\bATI\b|AMD/ATI", description) is not None
            gpu = amd and re.search(r"VGA compatible|Display controller", description) is not None
            found.append(PciAtomics(bus, clean(description), gpu, caps))

    for line in text.splitlines():
        head = re.match(
            r"^([0-9a-fA-F]{2,4}:[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})?\.[0-7])\s+(.*)$", line
        )
        if head is not None:
            flush()
            bus, description, caps = head.group(1), head.group(2), None
            continue
        atomic = re.search(r"AtomicOpsCap:\s*(.*)$", line)
        if atomic is not None:
            caps = tuple(
                word[:-1] for word in atomic.group(1).replace(",", " ").split()
                if word.endswith("+")
            )  # fmt: skip
    flush()
    return found


# Kernel parameters that bound the GTT aperture on amdgpu APUs (L-31): amdgpu.gttsize in
# MiB (deprecated on newer kernels), ttm.pages_limit / amdttm.pages_limit in 4 KiB pages.
GTT_PARAMS = ("amdgpu.gttsize", "ttm.pages_limit", "ttm.page_pool_size", "amdttm.pages_limit")


def gtt_params(cmdline: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for word in cmdline.split():
        key, sep, value = word.partition("=")
        if sep and key in GTT_PARAMS and (number := _int(value)) is not None:
            found[key] = number
    return found


def gtt_limit(params: dict[str, int]) -> int | None:
    """Bytes the kernel parameters allow the GTT, or None when none is set."""
    limits = [params[k] * 4096 for k in ("ttm.pages_limit", "amdttm.pages_limit") if k in params]
    if "amdgpu.gttsize" in params and params["amdgpu.gttsize"] > 0:
        limits.append(params["amdgpu.gttsize"] * MIB)
    return min(limits) if limits else None


def podman_version(text: str) -> str | None:
    """``podman --version``: ``podman version 4.3.1``."""
    match = re.search(r"version\s+(\d+(?:\.\d+)*)", text)
    return match.group(1) if match else None


def selinux_mode(enforce: str | None) -> str:
    """SELinux's mode from ``/sys/fs/selinux/enforce`` (None: no such file, so no SELinux):
    ``1`` enforcing, ``0`` permissive; anything else is not a mode the kernel writes."""
    if enforce is None:
        return "disabled"
    return {"1": "enforcing", "0": "permissive"}.get(enforce.strip(), "unknown")


def subids(text: str, user: str) -> int:
    """Subordinate ids of ``user`` in ``/etc/subuid`` (rootless podman needs 65536)."""
    total = 0
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] == user and (count := _int(parts[2])) is not None:
            total += count
    return total


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


# ------------------------------------------------------------------ a host's facts, as data


@dataclass(frozen=True)
class Disk:
    path: str
    free: int | None  # None: no existing folder on the way to it
    total: int | None
    # The folder on the way this user may not enter (a root-only /root, a 0700 state
    # dir of another user); None when every folder on the way is open to it.
    denied: str | None = None


@dataclass(frozen=True)
class EnvFile:
    """An env file inferfleet reads as this user (settings values, a process's secrets)."""

    path: str
    problem: str | None  # None: readable; else why not ("permission denied", "missing")


@dataclass
class Facts:
    user: str
    python: str
    gpus: list[Gpu] = field(default_factory=list)
    gpu_source: str | None = None  # nvidia-smi | amd-smi | rocm-smi | sysfs; None: no GPU found
    gpu_notes: list[str] = field(default_factory=list)  # tools that were there but failed
    ram: int = 0
    available: int = 0
    swap_total: int = 0
    swap_free: int = 0
    memlock: int | None = None  # bytes; None: unlimited
    linger: bool = False
    quadlet: bool = False  # podman's Quadlet generator is installed
    user_systemd: bool = False
    podman: str | None = None
    subuids: int = 0
    selinux: str = "disabled"  # enforcing | permissive | disabled (:func:`selinux_mode`)
    disks: list[Disk] = field(default_factory=list)
    pci: list[PciAtomics] = field(default_factory=list)
    gtt_params: dict[str, int] = field(default_factory=dict)
    env_files: list[EnvFile] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for item in data["pci"]:
            item["atomics"] = list(item["atomics"])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Facts:
        """Facts a remote ``doctor --local --json`` printed (validated by the caller's schema)."""
        values = dict(data)
        values["gpus"] = [Gpu(**g) for g in data.get("gpus", [])]
        values["disks"] = [Disk(**d) for d in data.get("disks", [])]
        values["env_files"] = [EnvFile(**e) for e in data.get("env_files", [])]
        values["pci"] = [
            PciAtomics(p["bus"], p["description"], p["gpu"], tuple(p["atomics"]))
            for p in data.get("pci", [])
        ]
        return cls(**values)
