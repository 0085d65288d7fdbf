"""Documents of ``doctor`` and ``host bootstrap``."""

from __future__ import annotations

from typing import (
    Literal,
    NotRequired,
)

from typing_extensions import TypedDict


class DoctorGpu(TypedDict):
    vendor: str
    index: int
    name: str
    memory: int  # bytes of dedicated memory
    bus: str
    uuid: str
    gtt: int | None  # bytes of the GTT aperture (AMD)
    unified: bool  # an APU: its budget is the GTT aperture (L-31)
    source: str


class DoctorDisk(TypedDict):
    path: str
    free: int | None
    total: int | None
    denied: NotRequired[str | None]  # a folder on the way this user may not enter


class DoctorEnvFile(TypedDict):
    path: str
    problem: str | None  # None: this user can read it; else "permission denied", "missing"


class DoctorPci(TypedDict):
    bus: str
    description: str
    gpu: bool
    atomics: list[str]


class DoctorFacts(TypedDict):
    user: str
    python: str
    gpus: list[DoctorGpu]
    gpu_source: str | None  # None: no GPU was found
    gpu_notes: list[str]
    ram: int
    available: int
    swap_total: int
    swap_free: int
    memlock: int | None  # None: unlimited
    linger: bool
    quadlet: bool
    user_systemd: bool
    podman: str | None
    subuids: int
    # From /sys/fs/selinux; absent from an older inferfleet's report (read as "disabled").
    selinux: NotRequired[Literal["enforcing", "permissive", "disabled", "unknown"]]
    disks: list[DoctorDisk]
    pci: list[DoctorPci]
    gtt_params: dict[str, int]
    env_files: NotRequired[list[DoctorEnvFile]]  # env files apply reads as this user


class DoctorFinding(TypedDict):
    check: str
    severity: Literal["error", "warning", "info"]
    message: str
    where: str
    fix: str
    lesson: str | None


class DoctorHost(TypedDict):
    host: str
    local: bool
    ok: bool  # no error finding
    facts: DoctorFacts
    findings: list[DoctorFinding]
    devices_yaml: str  # a ready `devices:` block for the fleet file


class DoctorDocument(TypedDict):
    schema: Literal["inferfleet.doctor/v1"]
    ok: bool
    hosts: list[DoctorHost]


class BootstrapStep(TypedDict):
    step: str  # ssh | python | wheel | venv | checkout | linger
    status: Literal["ok", "changed", "unchanged"]
    detail: str


class BootstrapDocument(TypedDict):
    schema: Literal["inferfleet.bootstrap/v1"]
    host: str
    ok: bool  # every step done and the host's doctor found no error
    changed: bool  # False: the host was already bootstrapped at this version and revision
    version: str  # the inferfleet version the host's venv runs
    revision: str  # the commit the host's checkout is at
    steps: list[BootstrapStep]
    doctor: DoctorHost
