"""SERVICE or URL: what the probe and the bench talk to, and the errors for bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.real_server import fleet_data, write_fleet

from inferfleet.client.target import from_service, from_url, resolve
from inferfleet.errors import UsageError
from inferfleet.fleetfile.loader import load_fleet


def test_a_service_brings_its_promises(tmp_path: Path) -> None:
    fleet = write_fleet(
        tmp_path / "fleet.yaml", fleet_data(18123, client={"max_tokens": 300, "tools": True})
    )
    target = from_service(load_fleet(fleet), "gemma")
    assert target.base_url == "http://127.0.0.1:18123"
    assert (target.model, target.ctx_per_slot, target.parallel) == ("gemma3-270m", 4096, 2)
    assert target.client is not None and target.client.tools and target.client.max_tokens == 300


def test_an_unknown_service_names_the_known_ones(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(18123))
    with pytest.raises(UsageError, match="no service named 'gema'") as info:
        resolve("gema", fleet, load_fleet)
    assert "known services: gemma" in info.value.hint


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
        ("https://llm.example:443/v1/", "https://llm.example:443"),
    ],
)
def test_urls_become_base_urls_that_promise_nothing(text: str, base: str) -> None:
    target = from_url(text)
    assert target.base_url == base
    assert target.model is None and target.client is None and not target.declared


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("http://", "not a URL with a host"),
        ("http://127.0.0.1:8080/v1/chat/completions", "not an endpoint path"),
    ],
)
def test_bad_urls_say_what_to_give(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        from_url(text)
