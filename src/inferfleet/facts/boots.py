"""A service's measured boots, recorded under ``facts/services/<service>.json`` (L-27).

``inferfleet facts record --from-log SERVICE=LOG`` keeps what llama-server
reported at boot (its memory breakdown per device, caches and buffers: the
parsed :class:`~inferfleet.budget.memreport.BootReport`), so ``budget`` and the
``device-memory-fit`` rule price that service by what it measured instead of
the compute estimate, in a checkout without the host or its logs. The record
names the model file's sha256 it was measured with: another file makes it
stale (not used, and said).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter

from inferfleet.budget.memreport import BootReport
from inferfleet.errors import FleetError
from inferfleet.facts.stored import mismatch, read_record
from inferfleet.io.state_files import MAX_STATE_BYTES, write_state

FORMAT = 1
MAX_BOOTS = 2  # two boots fix the non-KV line (L-27); more say nothing new


@dataclass(frozen=True)
class RecordedBoots:
    format: int
    service: str
    model: str
    model_sha256: str
    boots: tuple[BootReport, ...]


def boots_path(root: Path, service: str) -> Path:
    return root / "facts" / "services" / f"{service}.json"


def write_boots(root: Path, record: RecordedBoots) -> Path:
    data = TypeAdapter(RecordedBoots).dump_json(record, indent=1) + b"\n"
    if len(data) > MAX_STATE_BYTES:
        raise FleetError(
            f"the boots of service {record.service!r} take {len(data):,} bytes",
            hint="record one or two boots",
        )
    where = boots_path(root, record.service)
    write_state(where, data)
    return where


def read_boots(
    root: Path, service: str, model: str, sha256: str | None
) -> RecordedBoots | str | None:
    """The service's recorded boots when they were measured with this model file; None
    when none are recorded; why not (damaged, another service's, another file)."""
    where = boots_path(root, service)

    def check(record: RecordedBoots) -> str | None:
        wrong = mismatch("service", (record.format, record.service), (FORMAT, service))
        if wrong is None and not 1 <= len(record.boots) <= MAX_BOOTS:
            return f"{len(record.boots)} boots; one or two are recorded"
        return wrong

    record = read_record(
        where,
        RecordedBoots,
        what="recorded boots",
        hint=f"record them again: inferfleet facts record --from-log {service}=LOG",
        check=check,
    )
    if record is None or isinstance(record, str):
        return record
    if record.model != model:
        return f"{where} was measured with model {record.model!r}; the service serves {model!r}"
    if sha256 is None:
        return (
            f"{where}: the sha256 of model {model!r} is not known here "
            "(declare it, or record the model's facts)"
        )
    if record.model_sha256 != sha256:
        return (
            f"{where} was measured with sha256 {record.model_sha256[:12]}..., model {model!r} "
            f"is {sha256[:12]}... now: record the boots again"
        )
    return record
