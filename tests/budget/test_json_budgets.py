"""One bounded JSON loader for every untrusted JSON file (inferfleet.bounded.parse_json).

safetensors headers, ``config.json``, ``model.safetensors.index.json`` and
state files come from downloads, other tools or other users. Nesting is
measured on the bytes before the decoder runs (no ``RecursionError``),
integer literals are bounded (CPython's own 4,300-digit refusal is a bare
``ValueError``), and each failure is the reader's own error naming the file:
one bad model is an error of that model, and ``check`` and ``budget`` still
judge the rest of the fleet.
"""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest
import yaml
from helpers.cli import run_cli
from st_models import TINY_CONFIG, declared, vllm_fleet, write_model

from inferfleet.artifacts.hfconfig import parse_config
from inferfleet.artifacts.safetensors import SafetensorsError, read_header
from inferfleet.artifacts.st_model import shards_of
from inferfleet.bounded import BoundedReadError, load_json, parse_json
from inferfleet.gguf.source import BytesSource
from inferfleet.io.state_files import read_state

DEEP = b"[" * 200_000 + b"]" * 200_000
HUGE_INT = b"9" * 5000


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (DEEP, "more than 64 levels deep"),
        (b'{"n": ' + HUGE_INT + b"}", "an integer of 5,000 digits"),
        (b'{"n": NaN}', "NaN is not JSON"),
        (b'{"n": "\xff"}', "not UTF-8"),
        (b'{"n": ', "is not JSON"),
    ],
)
def test_the_loader_refuses_with_the_callers_error(raw: bytes, says: str) -> None:
    with pytest.raises(SafetensorsError, match=says) as caught:
        parse_json(raw, what="config.json", where="/m/config.json", error=SafetensorsError)
    assert caught.value.where == "/m/config.json"


def test_every_json_reader_of_a_model_refuses_cleanly() -> None:
    body = (
        b'{"w": {"dtype": "F32", "shape": '
        + DEEP[:100]
        + DEEP[-100:]
        + b', "data_offsets": [0, 4]}}'
    )
    with pytest.raises(SafetensorsError, match="levels deep"):
        read_header(BytesSource(struct.pack("<Q", len(body)) + body + b"xxxx", "w.safetensors"))
    config = (
        json.dumps(TINY_CONFIG)
        .encode()
        .replace(b'"num_hidden_layers": 2', b'"num_hidden_layers": ' + HUGE_INT)
    )
    with pytest.raises(SafetensorsError, match="5,000 digits"):
        parse_config(config, "/m/config.json")
    with pytest.raises(SafetensorsError, match="levels deep"):
        shards_of(b'{"weight_map": ' + DEEP + b"}", "/m/model.safetensors.index.json")


def test_a_fifo_or_an_oversized_state_file_is_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "record.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(BoundedReadError, match="is a FIFO, not a regular file"):
        read_state(fifo, dict, what="record", error=BoundedReadError, hint="")
    with pytest.raises(BoundedReadError, match="is a FIFO"):
        load_json(fifo, 1024, what="record")
    assert time.monotonic() - started < 5  # no writer ever comes: a blocking open would hang
    sparse = tmp_path / "big.json"
    with sparse.open("wb") as handle:  # 1.5 GB on paper, a few KB on disk
        handle.truncate(1_500_000_000)
    with pytest.raises(BoundedReadError, match="has 1,500,000,000 bytes; at most 1,048,576"):
        read_state(sparse, dict, what="record", error=BoundedReadError, hint="")


def test_one_bad_config_is_that_models_error_and_the_rest_of_the_fleet_is_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_model(tmp_path / "good")
    write_model(tmp_path / "bad")
    config = tmp_path / "bad" / "config.json"
    config.write_bytes(
        config.read_bytes().replace(b'"num_hidden_layers": 2', b'"num_hidden_layers": ' + HUGE_INT)
    )
    path = vllm_fleet(tmp_path, {"path": str(tmp_path / "good")}, declared(tmp_path / "good"))
    data = yaml.safe_load(path.read_text())
    data["models"]["bad"] = {
        "source": {"path": str(tmp_path / "bad")},
        "files": declared(tmp_path / "bad"),
    }
    data["services"]["worse"] = {**data["services"]["tiny"], "model": "bad", "port": 8001}
    path.write_text(yaml.safe_dump(data, sort_keys=False))

    checked = run_cli(monkeypatch, "check", str(path), "--json")
    assert "internal error" not in checked.stdout + checked.stderr
    assert "Traceback" not in checked.stdout + checked.stderr
    doc = json.loads(checked.stdout)
    text = json.dumps(doc)
    assert "5,000 digits" in text and str(config) in text
    # The good service was judged too: its KV capacity rule ran on its own files.
    judged = [f for f in doc["findings"] if f.get("service") == "tiny"]
    assert all("5,000 digits" not in f["message"] for f in judged)
    budget = run_cli(monkeypatch, "budget", "-f", str(path), "tiny", "--json")
    assert budget.code == 0, budget.stdout + budget.stderr
    (good,) = json.loads(budget.stdout)["vllm"]
    assert good["fits"] is True
    refused = run_cli(monkeypatch, "budget", "-f", str(path), "worse")
    assert refused.code == 2 and "5,000 digits" in " ".join(refused.stderr.split())
    assert "Traceback" not in refused.stderr
