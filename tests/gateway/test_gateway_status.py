"""The gateway row from LiteLLM's /health answer: matched by api_base, hostile input bounded."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from inferfleet.status.frontdoor import MAX_ERROR, FrontRow, backends_of

BY_BASE = {"http://127.0.0.1:8080/v1": "gemma", "http://127.0.0.1:8081/v1": "gemma-wide"}


def test_backends_are_matched_by_their_api_base() -> None:
    answer: dict[str, Any] = {
        "healthy_endpoints": [{"api_base": "http://127.0.0.1:8080/v1", "model": "openai/a"}],
        "unhealthy_endpoints": [
            {
                "api_base": "http://127.0.0.1:8081/v1/",
                "model": "openai/b",
                "error": "litellm.APIConnectionError: Connection error.\nstack trace line",
            },
            {"api_base": "http://10.0.0.9:9/v1", "error": "not ours"},  # not a fleet backend
        ],
        "healthy_count": 1,
    }
    found = backends_of(answer, BY_BASE)
    assert found == {
        "gemma": "ok",
        "gemma-wide": "litellm.APIConnectionError: Connection error. stack trace line",
    }


def test_an_endpoint_both_healthy_and_unhealthy_is_unreachable() -> None:
    entry = {"api_base": "http://127.0.0.1:8080/v1"}
    found = backends_of({"healthy_endpoints": [entry], "unhealthy_endpoints": [entry]}, BY_BASE)
    assert found == {"gemma": "unreachable"}


def test_a_huge_error_is_cut() -> None:
    entry = {"api_base": "http://127.0.0.1:8080/v1", "error": "x" * 100_000}
    found = backends_of({"unhealthy_endpoints": [entry]}, BY_BASE)
    assert len(found["gemma"]) == MAX_ERROR


@pytest.mark.parametrize(
    "answer",
    [
        [],
        "healthy",
        {"healthy_endpoints": "all"},
        {"unhealthy_endpoints": [{"api_base": 5}]},
        {"healthy_endpoints": [["http://127.0.0.1:8080/v1"]]},
    ],
)
def test_a_malformed_answer_is_refused(answer: Any) -> None:
    with pytest.raises(ValidationError):
        backends_of(answer, BY_BASE)


def test_the_row_is_a_problem_unless_healthy() -> None:
    assert not FrontRow("gateway", "h", "u", "healthy").problem
    for state in ("degraded", "down", "unhealthy", "foreign"):
        assert FrontRow("gateway", "h", "u", state).problem
