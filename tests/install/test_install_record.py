"""A cached install's record: read bounded, and anything but a good one means install again.

The record (``runtime.json`` beside a pinned venv, ``caddy.json`` beside Caddy) is
inferfleet's own file in the user's cache; a damaged, planted or huge one must
never hang or crash ``up`` (a FIFO there would block a plain read forever).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from inferfleet.install.pinned_venv import MAX_RECORD_BYTES, load_record


@dataclass(frozen=True)
class Shape:
    package: str
    version: str


def test_a_good_record_is_read_as_its_shape(tmp_path: Path) -> None:
    record = tmp_path / "runtime.json"
    record.write_text(json.dumps({"package": "litellm", "version": "1.106.12"}))
    assert load_record(record, Shape) == Shape("litellm", "1.106.12")


@pytest.mark.parametrize(
    "damage", ["absent", "fifo", "folder", "huge", "{not json", "[1, 2]", '{"package": "x"}']
)
def test_a_record_that_is_not_a_good_one_means_install_again(tmp_path: Path, damage: str) -> None:
    record = tmp_path / "runtime.json"
    if damage == "fifo":
        os.mkfifo(record)
    elif damage == "folder":
        record.mkdir()
    elif damage == "huge":
        record.write_bytes(b" " * (MAX_RECORD_BYTES + 1))
    elif damage != "absent":
        record.write_text(damage)
    assert load_record(record, Shape) is None
