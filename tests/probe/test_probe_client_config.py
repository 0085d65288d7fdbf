"""A client config is checked against what the probe found (L-18, L-25, L-26, L-44 to L-46).

The config here is hand-written in the shape a renderer produces; the
findings are those of the real test model (see test_probe_real.py).
"""

from __future__ import annotations

from inferfleet.probe.checks_features import effort_map
from inferfleet.probe.client_config import compare
from inferfleet.probe.evidence import Findings

GOOD = {
    "context_window": 4096,
    "max_tokens": 512,
    "reasoning_field": None,
    "input": ["text"],
    "reasoning_effort": {"low": "low", "medium": "medium", "high": "high"},
    "tools": False,
}


def base_model_findings() -> Findings:
    return Findings(
        model="gemma3-270m",
        runtime="llama.cpp",
        n_ctx_slot=4096,
        total_slots=2,
        reasoning_field=None,
        efforts_accepted=["minimal", "low", "medium", "high", "xhigh"],
        tools_ok=False,
        vision_ok=False,
    )


def test_a_config_that_matches_has_no_mismatch() -> None:
    assert compare(base_model_findings(), GOOD) == []


def test_L25_pool_advertised_instead_of_the_slot() -> None:
    (m,) = compare(base_model_findings(), {**GOOD, "context_window": 8192})
    assert (m.key, m.lesson, m.config, m.probed) == ("context_window", "L-25", 8192, 4096)
    assert "each server slot holds 4096" in m.message


def test_L26_max_tokens_must_leave_room_for_a_prompt() -> None:
    (m,) = compare(base_model_findings(), {**GOOD, "max_tokens": 4096})
    assert (m.key, m.lesson) == ("max_tokens", "L-26")


def test_L45_reasoning_read_from_the_wrong_field() -> None:
    found = base_model_findings()
    found.reasoning_field = "reasoning_content"
    (m,) = compare(found, {**GOOD, "reasoning_field": "reasoning"})
    assert (m.key, m.config, m.probed) == ("reasoning_field", "reasoning", "reasoning_content")
    # Expecting reasoning where the server writes none is a mismatch too.
    (m,) = compare(base_model_findings(), {**GOOD, "reasoning_field": "reasoning_content"})
    assert m.probed is None


def test_L44_images_offered_where_vision_failed_and_the_reverse() -> None:
    (m,) = compare(base_model_findings(), {**GOOD, "input": ["text", "image"]})
    assert (m.key, m.lesson) == ("input", "L-44")
    seeing = base_model_findings()
    seeing.vision_ok = True
    (m,) = compare(seeing, GOOD)
    assert "does not offer them" in m.message


def test_L46_effort_values_the_template_refuses() -> None:
    found = base_model_findings()
    found.efforts_accepted = ["low", "medium", "xhigh"]
    found.efforts_refused = {"minimal": 500, "high": 500}
    (m,) = compare(found, GOOD)
    assert (m.key, m.lesson) == ("reasoning_effort", "L-46")
    assert "'high': 'high'" in m.message
    assert compare(found, {**GOOD, "reasoning_effort": effort_map(found.efforts_accepted)}) == []


def test_L18_tools_offered_where_the_round_trip_failed() -> None:
    (m,) = compare(base_model_findings(), {**GOOD, "tools": True})
    assert (m.key, m.lesson) == ("tools", "L-18")


def test_keys_the_config_omits_and_facts_not_probed_are_not_judged() -> None:
    assert compare(base_model_findings(), {}) == []
    assert compare(Findings(), {**GOOD, "context_window": 8192, "tools": True}) == []
    # With no probed window, the config is still held to its own (L-26).
    (m,) = compare(Findings(), {**GOOD, "context_window": 512, "max_tokens": 512})
    assert (m.key, m.probed) == ("max_tokens", 512)


def test_L46_effort_map_takes_the_nearest_accepted_value() -> None:
    # The lesson's template: only xhigh|medium|low; 500 for the others.
    assert effort_map(["low", "medium", "xhigh"]) == {
        "minimal": "low",
        "low": "low",
        "medium": "medium",
        "high": "xhigh",  # tie between medium and xhigh goes up
        "xhigh": "xhigh",
    }
    assert effort_map([]) == {}
