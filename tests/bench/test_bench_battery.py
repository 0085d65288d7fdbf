"""The shipped battery: real prose and code, varied lengths, licensed, salted (L-47, L-48)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from inferfleet.bench.battery import load_battery, new_salt
from inferfleet.errors import UsageError

FOLDER = resources.files("inferfleet.bench").joinpath("battery")


def test_ten_or_more_real_prompts_of_prose_and_code_and_varied_length() -> None:
    battery = load_battery()
    assert len(battery.prompts) >= 10
    kinds = {p.kind for p in battery.prompts}
    assert kinds == {"prose", "code"}
    lengths = sorted(len(p.text) for p in battery.prompts)
    assert lengths[0] < 1500 and lengths[-1] > 8000  # short and long, several in between
    assert len({p.id for p in battery.prompts}) == len(battery.prompts)
    code = [p for p in battery.prompts if p.kind == "code"]
    assert all("def " in p.text for p in code)


def test_every_prompt_names_its_source_and_a_redistributable_licence() -> None:
    index = json.loads(FOLDER.joinpath("battery.json").read_text("utf-8"))
    licences = FOLDER.joinpath("LICENSES.md").read_text("utf-8")
    for entry in index["prompts"]:
        assert entry["source"] and entry["author"] and entry["title"], entry["id"]
        assert entry["licence"] in {"Public domain", "PSF-2.0", "MIT"}, entry["id"]
        assert entry["file"] in licences or entry["file"].startswith("prose_"), entry["id"]
        if entry["licence"] != "Public domain":
            assert entry["copyright"] in licences or entry["copyright"].split(";")[0] in licences
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in licences
    assert "Permission is hereby granted, free of charge" in licences


def test_L47_salt_comes_first_and_never_repeats() -> None:
    prompt = load_battery().prompts[0]
    salts = {new_salt() for _ in range(1000)}
    assert len(salts) == 1000
    salt = salts.pop()
    text = prompt.salted(salt)
    assert text.startswith(salt + " ") and text.endswith(prompt.text)
    assert prompt.salted(new_salt())[:16] != text[:16]


def test_selecting_prompts() -> None:
    battery = load_battery()
    assert [p.id for p in battery.select(["bisect", "gettysburg"])] == ["bisect", "gettysburg"]
    assert len(battery.select(limit=3)) == 3
    with pytest.raises(UsageError, match="unknown prompt id"):
        battery.select(["nope"])
    with pytest.raises(UsageError, match="at least 1"):
        battery.select(limit=0)
