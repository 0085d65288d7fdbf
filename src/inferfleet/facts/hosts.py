"""A host's GPUs as ``doctor`` discovered them, recorded under ``facts/hosts/<host>.json``.

``inferfleet facts record --host HOST`` keeps what ``doctor`` found there (each
GPU's vendor, runtime index, name and memory, and the tool that answered), so
``check`` compares the devices the fleet declares with the host's in a checkout
without the host (rule ``device-not-discovered``): a container's GPU passthrough
names a device by that index (``nvidia.com/gpu=N``), and one that is not there
fails only at start, after the old service was stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter

from inferfleet.doctor.parse import Gpu
from inferfleet.facts.stored import mismatch, read_record
from inferfleet.io.files import atomic_write

FORMAT = 1


@dataclass(frozen=True)
class RecordedHost:
    format: int
    host: str
    gpu_source: str | None  # nvidia-smi | amd-smi | rocm-smi | sysfs; None: none found
    gpus: tuple[Gpu, ...]
    notes: tuple[str, ...] = ()  # GPU tools that were there but failed


def host_path(root: Path, host: str) -> Path:
    return root / "facts" / "hosts" / f"{host}.json"


def write_host(root: Path, record: RecordedHost) -> Path:
    data = TypeAdapter(RecordedHost).dump_json(record, indent=1) + b"\n"
    where = host_path(root, record.host)
    where.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(where, data)
    return where


def read_host(root: Path, host: str) -> RecordedHost | str | None:
    """The host's recorded discovery; None when none is recorded; why not when it is
    damaged or another host's."""
    where = host_path(root, host)

    return read_record(
        where,
        RecordedHost,
        what="recorded host facts",
        hint=f"record them again: inferfleet facts record --host {host}",
        check=lambda record: mismatch("host", (record.format, record.host), (FORMAT, host)),
    )
